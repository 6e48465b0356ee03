"""The framed protocol the command server speaks with the host (``snapshots/sandbox/protocol.py``
is the host's side; keep the two in sync).

Frames: 1 type byte + 4-byte big-endian length + payload.
  client -> server: J request json, D data, K kill, I pty input, R resize json
  (after the ok reply to a `connect` request the connection carries raw bytes, no frames)
  server -> client: J reply json, D data, O stdout, E stderr, P pty output, X exit json
"""

import json
import struct

HDR = struct.Struct("!cI")


def send(sock, lock, typ, payload=b""):
    with lock:
        sock.sendall(HDR.pack(typ, len(payload)) + payload)


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv(sock):
    hdr = recv_exact(sock, HDR.size)
    if hdr is None:
        return None, None
    typ, size = HDR.unpack(hdr)
    payload = recv_exact(sock, size) if size else b""
    if payload is None:
        return None, None
    return typ, payload


def jdump(obj):
    return json.dumps(obj).encode()
