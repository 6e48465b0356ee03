"""A test peer on the model gateway's unix socket, for the tests of the sandbox's gateway door.

The door is a byte pipe from 127.0.0.1:4181 in the sandbox to this socket; these tests need a
peer that shows what reached it (echoed sizes and hashes, paced streams, a restart). It binds
its socket the way the gateway does (a temporary name, chmod 0666, renamed over
``gateway.sock``, the directory never removed). The real gateway behind the door is proven by
the runtime tests (tests/sessions/agents, tests/security/test_model_key_nowhere.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

STREAM_EVENTS = 5
STREAM_GAP = 0.3


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        if self.path == "/healthz":
            self._answer(200, {"ok": True, "generation": self.server.generation})
        elif self.path == "/stream":
            self._stream()
        else:
            self._answer(404, {"standin_gateway": True, "path": self.path})

    def do_POST(self) -> None:
        """/echo: the size and SHA-256 of the body it got, and a body of the size asked for."""
        self.server.seen.append(f"{self.command} {self.path}")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        size = int(self.headers.get("X-Reply-Bytes") or 0)
        reply = {"size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "pad": "x" * size}
        self._answer(200, reply)

    def _stream(self) -> None:
        """Server-sent events, one every STREAM_GAP seconds, each flushed as it is written."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for n in range(STREAM_EVENTS):
            self.wfile.write(b"data: %d %.3f\n\n" % (n, time.time()))
            self.wfile.flush()
            time.sleep(STREAM_GAP)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass  # a unix peer has no address to log


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    generation = 0
    seen: list[str]


class StandinGateway:
    """``start()`` binds and serves; ``stop()`` stops serving but leaves the socket file, as a
    crashed gateway does (connecting then fails with ECONNREFUSED)."""

    def __init__(self, socket_path: Path, generation: int = 1) -> None:
        self.path = Path(socket_path)
        self.generation = generation
        self.seen: list[str] = []
        self._server: _Server | None = None

    def start(self) -> StandinGateway:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        server = _Server(str(tmp), _Handler, bind_and_activate=False)
        server.generation, server.seen = self.generation, self.seen
        server.server_bind()
        tmp.chmod(0o666)
        server.server_activate()
        os.rename(tmp, self.path)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
