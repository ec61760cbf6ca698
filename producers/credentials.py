"""What a client presents to a secured server: a bearer token, and TLS material.

One picklable value every client shares (the Python `Client`, `flight_cli`, Spark's tasks). The
token is sent as `authorization: Bearer TOKEN` on every call and never printed: `repr` hides it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _pem(value: bytes | str | os.PathLike | None, what: str) -> bytes | None:
    """PEM bytes as given, or read from a file path."""
    if value is None or isinstance(value, bytes):
        return value
    try:
        with open(value, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"cannot read {what} from {os.fspath(value)!r}: {e.strerror}.") from None


@dataclass(frozen=True)
class Credentials:
    """`token`: the bearer token; `tls_root_certs`: the CA that signed the server's certificate (a
    PEM path or bytes; unset: the system's roots); `cert_chain`/`private_key`: this client's
    certificate for servers that demand one (mTLS)."""

    token: str | None = field(default=None, repr=False)
    tls_root_certs: bytes | None = field(default=None, repr=False)
    cert_chain: bytes | None = field(default=None, repr=False)
    private_key: bytes | None = field(default=None, repr=False)

    @classmethod
    def of(cls, token=None, tls_root_certs=None, cert_chain=None, private_key=None) -> Credentials:
        """From PEM bytes or file paths; a clear error for a file that cannot be read."""
        if (cert_chain is None) != (private_key is None):
            raise ValueError("A client certificate needs both its chain and its private key (mTLS); pass both or neither.")
        if token is not None and (not isinstance(token, str) or not token.strip() or "\n" in token):
            raise ValueError("The bearer token must be a non-empty single-line string.")
        return cls(token.strip() if token else None, _pem(tls_root_certs, "the TLS root certificates"),
                   _pem(cert_chain, "the client certificate chain"), _pem(private_key, "the client private key"))

    @property
    def tls(self) -> bool:
        return any(v is not None for v in (self.tls_root_certs, self.cert_chain))

    def client_kwargs(self) -> dict:
        """pyarrow FlightClient's TLS arguments."""
        kwargs = {}
        if self.tls_root_certs is not None:
            kwargs["tls_root_certs"] = self.tls_root_certs
        if self.cert_chain is not None:
            kwargs.update(cert_chain=self.cert_chain, private_key=self.private_key)
        return kwargs

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"authorization", b"Bearer " + self.token.encode())] if self.token else []

    def __repr__(self) -> str:
        shown = [k for k in ("token", "tls_root_certs", "cert_chain") if getattr(self, k) is not None]
        return f"Credentials({', '.join(f'{k}=<set>' for k in shown)})"
