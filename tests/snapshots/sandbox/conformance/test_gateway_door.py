"""Inside a sandbox, http://127.0.0.1:GATEWAY_PORT is the model gateway, even with egress
``none``: the sandbox's door carries it to the gateway's socket on the host, and a gateway
restarted while the sandbox runs is reached without restarting the sandbox.

The gateway here is a stand-in on the configured socket (``gateway_standin``); the real one was
built in parallel. The attacks on the door are tests/security/test_gateway_door.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from snapshots.sandbox.base import GATEWAY_PORT, NetworkPolicy
from tests.snapshots.sandbox.gateway_standin import STREAM_EVENTS, STREAM_GAP, StandinGateway

HEALTHZ = f"http://127.0.0.1:{GATEWAY_PORT}/healthz"
FETCH = (
    "import json, sys, urllib.request as u, urllib.error as e\n"
    "try:\n"
    "    r = u.urlopen(sys.argv[1], timeout=10); print(r.status, r.read().decode())\n"
    "except e.HTTPError as x:\n"
    "    print(x.code, x.read().decode())\n"
)


@pytest.fixture
def gateway(backend, caps) -> Iterator[StandinGateway]:
    if "gateway_door" not in caps:
        pytest.skip(
            "this backend reaches the gateway by its public URL (INSPECT_GATEWAY_PUBLIC_URL)"
        )
    gw = StandinGateway(backend.gateway_socket).start()
    yield gw
    gw.stop()


def fetch(sandbox, url: str = HEALTHZ) -> tuple[int, dict]:
    r = sandbox.run(["python3", "-c", FETCH, url], timeout=30)
    assert r.exit_code == 0, r.stdout + r.stderr
    status, body = r.stdout.split(" ", 1)
    return int(status), json.loads(body)


def test_the_gateway_answers_inside_a_sandbox_without_network(new_sandbox, gateway):
    sb = new_sandbox(network=NetworkPolicy("none"))

    assert fetch(sb) == (200, {"ok": True, "generation": 1})
    curl = sb.run(["curl", "-sS", "--max-time", "10", HEALTHZ], timeout=30)
    assert json.loads(curl.stdout) == {"ok": True, "generation": 1}, curl.stderr
    assert gateway.seen == ["GET /healthz", "GET /healthz"]


@pytest.mark.parametrize("mode", ["allowlist", "open"])
def test_the_gateway_answers_whatever_the_egress(new_sandbox, gateway, mode):
    sb = new_sandbox(network=NetworkPolicy(mode, ("allowed.test",) if mode == "allowlist" else ()))

    # An allowlist sandbox's HTTP_PROXY must not capture the door: loopback is in NO_PROXY.
    assert fetch(sb) == (200, {"ok": True, "generation": 1})


def test_a_gateway_restart_is_seen_by_a_running_sandbox(new_sandbox, gateway, backend):
    sb = new_sandbox(network=NetworkPolicy("none"))
    assert fetch(sb)[1]["generation"] == 1

    gateway.stop()
    status, body = fetch(sb)
    assert status == 503
    assert "gateway is not running" in body["error"]["message"]

    # The restarted gateway renames a new socket over the one the sandbox has mounted.
    restarted = StandinGateway(backend.gateway_socket, generation=2).start()
    try:
        assert fetch(sb) == (200, {"ok": True, "generation": 2})
    finally:
        restarted.stop()


STREAM = f"""
import socket, time
s = socket.create_connection(("127.0.0.1", {GATEWAY_PORT}), timeout=20)
s.sendall(b"GET /stream HTTP/1.1\\r\\nHost: gateway\\r\\n\\r\\n")
while chunk := s.recv(65536):
    for line in chunk.split(b"\\n"):
        if line.startswith(b"data: "):
            print(line.decode()[6:], "%.3f" % time.time(), flush=True)
"""


def test_a_stream_passes_through_as_it_is_written(new_sandbox, gateway):
    """Server-sent events reach the runtime one by one, not buffered until the response ends."""
    sb = new_sandbox(network=NetworkPolicy("none"))

    r = sb.run(["python3", "-c", STREAM], timeout=60)

    events = [line.split() for line in r.stdout.splitlines()]
    assert [int(n) for n, _, _ in events] == list(range(STREAM_EVENTS)), r.stdout + r.stderr
    delays = [float(got) - float(sent) for _, sent, got in events]
    assert max(delays) < STREAM_GAP, delays  # each arrived before the next was written


BULK = f"""
import concurrent.futures, hashlib, json, os, urllib.request as u
def post(i):
    body = os.urandom(3 * 1024 * 1024 + i)
    req = u.Request("http://127.0.0.1:{GATEWAY_PORT}/echo", data=body,
                    headers={{"X-Reply-Bytes": str(2 * 1024 * 1024)}})
    reply = json.loads(u.urlopen(req, timeout=60).read())
    return (reply["size"] == len(body) and reply["sha256"] == hashlib.sha256(body).hexdigest()
            and len(reply["pad"]) == 2 * 1024 * 1024)
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    print(sum(pool.map(post, range(32))))
"""


def test_large_requests_and_replies_cross_intact_side_by_side(new_sandbox, gateway):
    sb = new_sandbox(network=NetworkPolicy("none"))

    r = sb.run(["python3", "-c", BULK], timeout=120)

    assert r.stdout.strip() == "32", r.stdout + r.stderr


NODE_FETCH = f"""
const url = "http://127.0.0.1:{GATEWAY_PORT}/healthz";
(async () => {{
  let ok = 0;
  for (let i = 0; i < 20; i++) {{
    const r = await fetch(url);
    if (r.status === 200 && (await r.json()).ok === true) ok++;
  }}
  console.log(ok);
}})().catch((e) => {{ console.log("ERR", e.cause || e); process.exit(1); }});
"""


def test_node_fetch_reaches_the_gateway_over_kept_alive_connections(new_sandbox, gateway):
    """Claude Code and OpenCode run on node, whose fetch keeps connections alive."""
    if not Path("/usr/bin/node").exists():
        pytest.skip("node is not installed on this machine")
    sb = new_sandbox(network=NetworkPolicy("none"))

    r = sb.run(["node", "-e", NODE_FETCH], timeout=60)

    assert r.stdout.strip() == "20", r.stdout + r.stderr
