"""Host side of the framed protocol spoken with the init (``sandbox_init/``) over a unix socket.

Frames: 1 type byte + 4-byte big-endian length + payload (see ``sandbox_init/frames.py`` for
the types).
"""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

HDR = struct.Struct("!cI")


class ProtocolEOF(ConnectionError):
    """The server closed the connection (usually: the sandbox died)."""


def send(sock: socket.socket, typ: bytes, payload: bytes = b"") -> None:
    sock.sendall(HDR.pack(typ, len(payload)) + payload)


def send_json(sock: socket.socket, obj: dict[str, Any], typ: bytes = b"J") -> None:
    send(sock, typ, json.dumps(obj).encode())


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProtocolEOF("sandbox closed the connection")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket) -> tuple[bytes, bytes]:
    typ, size = HDR.unpack(_recv_exact(sock, HDR.size))
    return typ, (_recv_exact(sock, size) if size else b"")


def recv_json(sock: socket.socket) -> dict[str, Any]:
    typ, payload = recv(sock)
    if typ != b"J":
        raise ProtocolEOF(f"unexpected frame {typ!r}")
    return json.loads(payload)


def connect(path: str, timeout: float | None = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def unix_path(path: Path) -> tuple[str, int | None]:
    """A bind/connect-able name for a socket path despite the 108-byte sun_path limit.

    Returns the name and a directory fd the caller must close after bind()/connect().
    """
    s = str(path)
    if len(s) < 100:
        return s, None
    dirfd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{dirfd}/{path.name}", dirfd
