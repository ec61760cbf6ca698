"""A throwaway CA and certificates (trustme) for the demo, the benchmarks and the tests: bring your own in production."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace


def write_certs(folder: str | Path, client: str | None = None) -> SimpleNamespace:
    """ca.pem, server.pem/server.key for 127.0.0.1 and localhost, and with `client` a client
    certificate client.pem/client.key for that name (mTLS); returns their paths."""
    import trustme

    d = Path(folder)
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    server.cert_chain_pems[0].write_to_path(str(d / "server.pem"))
    server.private_key_pem.write_to_path(str(d / "server.key"))
    paths = SimpleNamespace(ca=str(d / "ca.pem"), cert=str(d / "server.pem"), key=str(d / "server.key"))
    if client is not None:
        issued = ca.issue_cert(client)
        issued.cert_chain_pems[0].write_to_path(str(d / "client.pem"))
        issued.private_key_pem.write_to_path(str(d / "client.key"))
        paths.client_cert, paths.client_key = str(d / "client.pem"), str(d / "client.key")
    return paths
