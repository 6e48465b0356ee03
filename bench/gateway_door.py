"""What the model gateway's door costs inside a local sandbox (docs/model-gateway.md).

    .venv/bin/python bench/gateway_door.py [--runtime bwrap runsc] [--requests 500]

Needs root (the local backend). Serves a small HTTP responder on a unix socket where the
gateway's would be, starts a sandbox with egress ``none`` per runtime and, from inside it,
measures the same requests two ways in one run: through the door (``127.0.0.1:4181``) and
straight to the mounted socket (``/run/inspect-gateway/gateway.sock``):
- a request/response over one kept-alive connection (how the agent CLIs call), p50 and p99;
- a request on a new connection each time, p50 and p99;
- a streamed reply of 100 server-sent events written 5 ms apart (a fast model's tokens): how
  long each took from being written to being read, p50 and p95.
Prints a table (milliseconds) and, as its last line, the same figures as JSON (also written to
var/bench/gateway_door.json).
"""

from __future__ import annotations

import argparse
import json
import os
import socketserver
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
sys.path.insert(0, str(ROOT))

from snapshots.sandbox.base import GATEWAY_PORT, Limits, NetworkPolicy  # noqa: E402
from snapshots.sandbox.gateway_door import GATEWAY_MOUNT  # noqa: E402
from snapshots.sandbox.local import LocalBackend  # noqa: E402

EVENTS = 100
EVENT_GAP = 0.005


class Responder(socketserver.StreamRequestHandler):
    """Keep-alive HTTP/1.1: /stream answers EVENTS events, each stamped with the time it is
    written, else a small JSON body (headers and body in two writes, as many servers do)."""

    def handle(self) -> None:
        while True:
            line = self.rfile.readline()
            if not line:
                return
            path = line.split()[1]
            while self.rfile.readline() not in (b"\r\n", b""):
                pass
            if path == b"/stream":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
                for _ in range(EVENTS):
                    event = b"data: %.6f\n\n" % time.time()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    time.sleep(EVENT_GAP)
                self.wfile.write(b"0\r\n\r\n")
            else:
                body = b'{"ok": true}'
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


INSIDE = r"""
import json, socket, sys, time
PORT, SOCK, N = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def tcp(): return socket.create_connection(("127.0.0.1", PORT))
def unix():
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK); return s
def request(s, f, path=b"/healthz"):
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: gateway\r\n\r\n")
    length = 0
    while (line := f.readline()) != b"\r\n":
        if line.lower().startswith(b"content-length"): length = int(line.split(b":")[1])
    return f.read(length)
def pct(xs):
    xs = sorted(xs); return [round(xs[len(xs) // 2], 3), round(xs[int(len(xs) * 0.99)], 3)]
def p95(xs):
    xs = sorted(xs); return [round(xs[len(xs) // 2], 3), round(xs[int(len(xs) * 0.95)], 3)]
out = {}
for name, connect in (("door", tcp), ("socket", unix)):
    s = connect(); f = s.makefile("rb"); xs = []
    for i in range(N + 20):
        t = time.perf_counter(); request(s, f)
        if i >= 20: xs.append((time.perf_counter() - t) * 1000)
    out[name + "_kept_alive"] = pct(xs)
    xs = []
    for i in range(N):
        t = time.perf_counter(); c = connect(); request(c, c.makefile("rb")); c.close()
        xs.append((time.perf_counter() - t) * 1000)
    out[name + "_new_connection"] = pct(xs)
    s.sendall(b"GET /stream HTTP/1.1\r\nHost: gateway\r\n\r\n")
    delays = []; data = b""
    while not data.endswith(b"0\r\n\r\n"):
        chunk = s.recv(65536); now = time.time(); data += chunk
        delays += [(now - float(line[6:])) * 1000
                   for line in chunk.split(b"\n") if line.startswith(b"data: ")]
    out[name + "_stream_event"] = p95(delays)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", nargs="+", default=["bwrap", "runsc"])
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/gateway_door.py: the local backend needs root")
    with tempfile.TemporaryDirectory(prefix="door-bench-") as tmp:
        socket_path = Path(tmp) / "gateway" / "gateway.sock"
        socket_path.parent.mkdir()
        server = Server(str(socket_path), Responder)
        socket_path.chmod(0o666)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        results = {runtime: measure(runtime, Path(tmp), socket_path, args.requests)
                   for runtime in args.runtime}  # fmt: skip
        server.shutdown()
        server.server_close()
    rows = sorted({row for figures in results.values() for row in figures})
    print(f"{'':<28}" + "".join(f"{r + ' p50':>14}{r + ' p99':>14}" for r in results))
    for row in rows:
        cells = "".join(f"{results[r][row][0]:>14}{results[r][row][1]:>14}" for r in results)
        print(f"{row:<28}{cells}")
    print("(stream_event: p50 and p95 of each event's delay from write to read)")
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "gateway_door.json").write_text(json.dumps(results))
    print(json.dumps(results))


def measure(runtime: str, tmp: Path, socket_path: Path, requests: int) -> dict[str, list[float]]:
    backend = LocalBackend(tmp / runtime, runtime=runtime, gateway_socket=socket_path)
    sb = backend.create(
        snapshot=None, network=NetworkPolicy("none"), limits=Limits(wall_seconds=600)
    )
    try:
        inside = f"{GATEWAY_MOUNT}/{socket_path.name}"
        r = sb.run(["python3", "-c", INSIDE, str(GATEWAY_PORT), inside, str(requests)], timeout=600)
        if r.exit_code != 0:
            sys.exit(f"{runtime}: {r.stderr.strip()[-500:]}")
        return json.loads(r.stdout)
    finally:
        sb.terminate()


if __name__ == "__main__":
    main()
