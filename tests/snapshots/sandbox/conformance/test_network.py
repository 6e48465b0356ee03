"""Egress follows the policy, enforced by the backend."""

from __future__ import annotations

import pytest

from snapshots.sandbox.base import NetworkPolicy
from tests.nethosts import banner_server, net_host
from tests.snapshots.sandbox.conformance.conftest import ALLOWED_TEST_NETWORK

PROBE = (
    'python3 -c "import socket,sys\n'
    "s=socket.socket(); s.settimeout(3)\n"
    "try:\n s.connect(('127.0.0.1', {port})); print('CONNECTED', s.recv(100).decode())\n"
    "except OSError as e: print('BLOCKED', e)\""
)


@pytest.fixture
def host_tcp_server():
    """A TCP server on the HOST's 127.0.0.1 standing in for PostgreSQL or Redis."""
    with banner_server("127.0.0.1", b"host-service-banner") as port:
        yield port


@pytest.fixture(scope="module")
def allowed_test_host():
    """allowed.test: a host in a network namespace (HTTP on 80, TCP on 443), where the local
    backend's ``egress_hosts`` sends that name."""
    with net_host("c", ALLOWED_TEST_NETWORK, port=80, more_ports=(443,), banner="allowed") as h:
        yield h


def test_none_blocks_host_loopback_services(new_sandbox, caps, host_tcp_server):
    if "same_host" not in caps:
        pytest.skip("needs the sandbox on this machine")
    sb = new_sandbox(network=NetworkPolicy("none"))
    r = sb.run(PROBE.format(port=host_tcp_server))
    assert "BLOCKED" in r.stdout, r.stdout + r.stderr
    assert "host-service-banner" not in r.stdout


def test_none_has_a_working_private_loopback(new_sandbox):
    sb = new_sandbox(network=NetworkPolicy("none"))
    sb.run("python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &")
    r = sb.run(
        'for i in $(seq 50); do python3 -c "import urllib.request as u;'
        "print(u.urlopen('http://127.0.0.1:8765/').status)\" 2>/dev/null && break;"
        " sleep 0.1; done"
    )
    assert "200" in r.stdout


def test_none_blocks_external_addresses(new_sandbox):
    sb = new_sandbox(network=NetworkPolicy("none"))
    r = sb.run("ip -o link 2>/dev/null || cat /proc/net/dev")
    assert "eth" not in r.stdout  # only lo exists


def test_open_does_not_reach_host_loopback(new_sandbox, caps, host_tcp_server):
    """``open`` is NAT out of the sandbox's own namespace: the host's loopback services
    (PostgreSQL, Redis, the dashboard) stay out of reach (tests/security has the full set)."""
    if "same_host" not in caps:
        pytest.skip("needs the sandbox on this machine")
    sb = new_sandbox(network=NetworkPolicy("open"))
    r = sb.run(PROBE.format(port=host_tcp_server))
    assert "BLOCKED" in r.stdout, r.stdout + r.stderr
    assert "host-service-banner" not in r.stdout


FETCH = (
    'python3 -c "import urllib.request as u, urllib.error as e\n'
    "try: print('OK', u.urlopen('{url}', timeout=5).read().decode())\n"
    "except e.HTTPError as x: print('HTTP', x.code, x.read().decode())\n"
    "except Exception as x: print('ERR', x)\""
)


def test_allowlist_allows_listed_domain_only(new_sandbox, caps, allowed_test_host, host_tcp_server):
    if "same_host" not in caps:
        pytest.skip("uses the local backend's allowed.test -> test host mapping")
    sb = new_sandbox(network=NetworkPolicy("allowlist", ("allowed.test",)))
    ok = sb.run(FETCH.format(url="http://allowed.test/"))
    assert "OK allowed got:GET / HTTP/1.1" in ok.stdout, ok.stdout + ok.stderr
    denied = sb.run(FETCH.format(url="http://denied.test/"))
    assert "HTTP 403" in denied.stdout and "not on the allowlist" in denied.stdout
    # An IP literal is not a listed domain either.
    by_ip = sb.run(FETCH.format(url=f"http://{allowed_test_host.address}/"))
    assert "OK" not in by_ip.stdout
    # Bypassing the proxy with a raw socket gets nowhere.
    raw = sb.run(PROBE.format(port=host_tcp_server))
    assert "BLOCKED" in raw.stdout


def test_allowlist_https_connect_is_checked(new_sandbox, caps, allowed_test_host):
    if "same_host" not in caps:
        pytest.skip("uses the local backend's proxy")
    sb = new_sandbox(network=NetworkPolicy("allowlist", ("allowed.test",)))
    script = (
        'python3 -c "import socket\n'
        "for host in ('allowed.test', 'evil.example'):\n"
        " s=socket.create_connection(('127.0.0.1', 3128), timeout=5)\n"
        " req = 'CONNECT %s:443 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' % host\n"
        " s.sendall(req.encode())\n"
        " print(host, s.recv(200).split(b'\\r\\n')[0].decode())\""
    )
    r = sb.run(script)
    assert "allowed.test HTTP/1.1 200" in r.stdout, r.stdout + r.stderr
    assert "evil.example HTTP/1.1 403" in r.stdout
