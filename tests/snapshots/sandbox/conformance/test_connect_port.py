"""The host reaches a server listening inside the sandbox (the live preview's door), even when
the sandbox has no network at all."""

from __future__ import annotations

import time

import pytest

from snapshots.sandbox.base import SandboxError

SERVER = (
    "import socket\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', 8765)); s.listen(4)\n"
    "while True:\n"
    "    c, _ = s.accept(); data = c.recv(100); c.sendall(b'echo:' + data); c.close()\n"
)


def _connect(sandbox, port):
    try:
        return sandbox.connect_port(port)
    except SandboxError as exc:
        if "cannot connect to ports" in str(exc):
            pytest.skip(str(exc))
        raise


def test_a_port_inside_a_sandbox_without_network_answers_the_host(sandbox):
    sandbox.write_file("server.py", SERVER.encode())
    sandbox.run("nohup python3 server.py >/dev/null 2>&1 &", timeout=10)
    deadline = time.monotonic() + 10
    while True:
        try:
            sock = _connect(sandbox, 8765)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with sock:
        sock.sendall(b"hello")
        reply = b""
        while chunk := sock.recv(100):
            reply += chunk
    assert reply == b"echo:hello"


def test_a_port_nobody_listens_on_is_refused(sandbox):
    with pytest.raises(ConnectionRefusedError, match="port 8799"):
        _connect(sandbox, 8799)
