"""Red team, finding 4: the allowlist proxy. An allowed name must not be a way to reach
something else: not another virtual host behind it (Host header or TLS SNI fronting), not
another port, not the host's loopback or a private network through a name that resolves there.
Runs on bubblewrap and gVisor, against test hosts in network namespaces the test makes."""

from __future__ import annotations

import subprocess

import pytest

from snapshots.sandbox.base import Limits, NetworkPolicy
from snapshots.sandbox.netns import parse_exceptions
from tests.nethosts import net_host
from tests.security.test_sandbox_network import RUNTIMES, _skip_reason

# Speaks to the proxy inside the sandbox with a raw socket, as an attacker would.
CLIENT = r"""
import socket, ssl, sys
def hello(sni):
    ctx = ssl.create_default_context(); i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(i, o, server_hostname=sni)
    try:
        t.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()
def talk(request, payload=b""):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=15)
    s.sendall(request)
    head = s.recv(4096)
    reply = head
    if head.startswith(b"HTTP/1.1 200") and payload:
        s.sendall(payload)
        reply += b"|"
    try:
        while chunk := s.recv(4096):
            reply += chunk
    except OSError:
        pass
    return reply.decode("latin-1")
kind, target = sys.argv[1], sys.argv[2]
if kind == "connect":
    sni = sys.argv[3]
    print(talk(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode(), hello(sni)))
elif kind == "get":
    front = sys.argv[3]
    print(talk(f"GET http://{target}/ HTTP/1.1\r\nHost: {front}\r\n\r\n".encode()))
"""


@pytest.fixture(scope="module")
def internet_host():
    with net_host("e", "198.51.100", port=443, more_ports=(80, 6379), banner="upstream") as h:
        yield h


@pytest.fixture(scope="module")
def private_host():
    with net_host("m", "10.250.8", port=443, more_ports=(80,), banner="mirror") as h:
        yield h


@pytest.fixture(scope="module", params=RUNTIMES)
def runtime(request):
    reason = _skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    return request.param


def _backend(root, runtime, internet_host, private_host, **kw):
    from snapshots.sandbox.local import LocalBackend

    hosts = {
        "allowed.test": internet_host.address,
        "loop.test": "127.0.0.1",
        "mirror.test": private_host.address,
    }
    return LocalBackend(root, runtime=runtime, egress_hosts=hosts, **kw)


@pytest.fixture(scope="module")
def proxied(runtime, internet_host, private_host, tmp_path_factory):
    """An allowlist sandbox and a function running CLIENT in it."""
    be = _backend(tmp_path_factory.mktemp("proxy") / runtime, runtime, internet_host, private_host)
    src = tmp_path_factory.mktemp("tree")
    (src / "client.py").write_text(CLIENT)
    snap = be.snapshot_from_directory(str(src))
    domains = ("allowed.test", "loop.test", "localhost", "mirror.test")
    sb = be.create(
        snapshot=snap,
        network=NetworkPolicy("allowlist", domains),
        limits=Limits(wall_seconds=120, memory_mb=1024, pids=256),
    )

    def run(*args: str) -> str:
        r = sb.run(["python3", "client.py", *args], timeout=60)
        return r.stdout + r.stderr

    run.sandbox = sb  # type: ignore[attr-defined]
    yield run
    sb.terminate()
    be.reap()


def refusals(sb) -> list[dict]:
    """What the worker turns into ``egress_refused`` events (and build-log lines)."""
    return sb.egress_refusals()


def test_control_an_allowed_name_works(proxied):
    out = proxied("connect", "allowed.test:443", "allowed.test")
    assert "HTTP/1.1 200" in out and "upstream got:" in out, out
    out = proxied("get", "allowed.test", "allowed.test")
    assert "upstream got:GET / HTTP/1.1" in out, out


def test_host_header_is_set_from_the_allowed_name(proxied):
    out = proxied("get", "allowed.test", "evil.example")
    assert "upstream got:" in out, out
    assert "evil.example" not in out and "Host: allowed.test" in out, out


def test_connect_needs_tls_sni_equal_to_the_connect_host(proxied):
    out = proxied("connect", "allowed.test:443", "evil.example")
    assert "upstream" not in out, out  # not a byte reached the upstream
    assert any("TLS server name 'evil.example'" in r["reason"] for r in refusals(proxied.sandbox))


def test_connect_to_a_port_the_policy_does_not_name_is_refused(proxied):
    out = proxied("connect", "allowed.test:6379", "allowed.test")
    assert "HTTP/1.1 403" in out and "port 6379 is not allowed" in out, out
    assert "upstream" not in out


@pytest.mark.parametrize("name", ["loop.test", "localhost"])
def test_a_name_resolving_to_loopback_is_refused(proxied, name):
    out = proxied("connect", f"{name}:443", name)
    assert "HTTP/1.1 403" in out and "loopback, private or link-local" in out, out
    out = proxied("get", name, name)
    assert "HTTP/1.1 403" in out, out
    assert any(r["host"] == name for r in refusals(proxied.sandbox))


def test_a_name_resolving_to_a_private_address_is_refused(proxied):
    out = proxied("connect", "mirror.test:443", "mirror.test")
    assert "HTTP/1.1 403" in out and "mirror" not in out.split("403", 1)[0], out
    assert "mirror got" not in out


def test_an_operator_exception_lets_allowlist_and_open_reach_that_address(
    runtime, internet_host, private_host, tmp_path_factory
):
    exceptions = parse_exceptions(f"mirror={private_host.address}/32:443")
    # Its own NAT group: the host table of a group carries one operator configuration.
    be = _backend(
        tmp_path_factory.mktemp("exc") / runtime,
        runtime,
        internet_host,
        private_host,
        egress_exceptions=exceptions,
        nat_gid=100_002,
    )
    src = tmp_path_factory.mktemp("tree")
    (src / "client.py").write_text(CLIENT)
    (src / "probe.py").write_text(
        "import socket, sys\n"
        "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)\n"
        "s.sendall(b'hi'); print(s.recv(100).decode())\n"
    )
    snap = be.snapshot_from_directory(str(src))
    lim = Limits(wall_seconds=120, memory_mb=1024, pids=256)
    allow = be.create(
        snapshot=snap, network=NetworkPolicy("allowlist", ("mirror.test",)), limits=lim
    )
    opened = be.create(snapshot=snap, network=NetworkPolicy("open"), limits=lim)
    try:
        out = allow.run(["python3", "client.py", "connect", "mirror.test:443", "mirror.test"])
        assert "HTTP/1.1 200" in out.stdout and "mirror got:" in out.stdout, out.stdout
        # The exception names port 443 only.
        out = allow.run(["python3", "client.py", "get", "mirror.test", "mirror.test"])
        assert "HTTP/1.1 403" in out.stdout, out.stdout
        out = opened.run(["python3", "probe.py", private_host.address, "443"], timeout=30)
        assert "mirror got:hi" in out.stdout, out.stdout + out.stderr
        out = opened.run(["python3", "probe.py", private_host.address, "80"], timeout=30)
        assert "mirror got" not in out.stdout, out.stdout
    finally:
        allow.terminate()
        opened.terminate()
        be.reap()
        subprocess.run(["nft", "delete", "table", "inet", "inspect_egress_100002"], check=False)
