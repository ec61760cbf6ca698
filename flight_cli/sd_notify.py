"""systemd's readiness protocol (sd_notify): `READY=1` once serve listens, `STOPPING=1` as it
drains, sent to the datagram socket NOTIFY_SOCKET names (a unit with Type=notify sets it)."""

from __future__ import annotations

import os
import socket


def notify(state: str) -> bool:
    """Send `state` (lines such as READY=1, STATUS=...) when NOTIFY_SOCKET is set; True when sent.
    OSError when the socket is set but cannot be reached (systemd would wait for readiness in vain)."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):  # Linux's abstract namespace
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.connect(address)
        sock.sendall(state.encode())
    return True
