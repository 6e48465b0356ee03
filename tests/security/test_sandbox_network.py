"""Red team, finding 1: an ``open`` sandbox reaches the internet through NAT, and nothing of the
host: not its loopback services (PostgreSQL, Redis, the dashboard), not its own addresses, not a
private network behind it. Runs on bubblewrap and gVisor."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest

from snapshots.sandbox.base import Limits, NetworkPolicy, Sandbox
from tests.nethosts import banner_server, net_host

RUNTIMES = ["bwrap", "runsc"]

PROBE = (
    "import socket, sys\n"
    "for target in sys.argv[1:]:\n"
    "    host, port = target.rsplit(':', 1)\n"
    "    s = socket.socket(); s.settimeout(4)\n"
    "    try:\n"
    "        s.connect((host, int(port))); s.sendall(b'hello')\n"
    "        print('CONNECTED', target, s.recv(200).decode(errors='replace'))\n"
    "    except OSError as e:\n"
    "        print('BLOCKED', target, e)\n"
)


def _skip_reason(runtime: str) -> str | None:
    if os.geteuid() != 0:
        return "the local backend needs root"
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed"
    if runtime == "runsc":
        from snapshots.sandbox import runsc

        if runsc.problem():
            return f"runsc cannot run here: {runsc.problem()}"
    return None


@pytest.fixture(scope="module", params=RUNTIMES)
def backend(request, tmp_path_factory):
    from snapshots.sandbox.local import LocalBackend

    reason = _skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    be = LocalBackend(tmp_path_factory.mktemp("net") / request.param, runtime=request.param)
    yield be
    for sid in be.list_sandboxes():
        be.attach(sid).terminate()
    be.reap()


@pytest.fixture(scope="module")
def open_sandbox(backend, tmp_path_factory) -> Iterator[Sandbox]:
    src = tmp_path_factory.mktemp("tree")
    (src / "probe.py").write_text(PROBE)
    snap = backend.snapshot_from_directory(str(src))
    sb = backend.create(
        snapshot=snap,
        network=NetworkPolicy("open"),
        limits=Limits(wall_seconds=120, memory_mb=1024, pids=256),
    )
    yield sb
    sb.terminate()


def probe(sb: Sandbox, *targets: str) -> dict[str, str]:
    r = sb.run(["python3", "probe.py", *targets], timeout=60)
    out = {}
    for line in r.stdout.splitlines():
        verdict, target, *rest = line.split(" ", 2)
        out[target] = f"{verdict} {' '.join(rest)}"
    assert set(out) == set(targets), r.stdout + r.stderr
    return out


def host_addresses() -> list[str]:
    """This machine's own non-loopback IPv4 addresses (a sandbox must not reach them)."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    addrs = [line.split()[3].split("/")[0] for line in out.splitlines()]
    return [a for a in addrs if not a.startswith("127.")]


@pytest.fixture
def dashboard_port() -> Iterator[int]:
    """A TCP server on all of this machine's addresses, like daphne serving the dashboard."""
    with banner_server("0.0.0.0", b"dashboard-banner") as port:  # noqa: S104 - every address
        yield port


def test_open_cannot_reach_host_postgres_or_redis(open_sandbox):
    targets = ["127.0.0.1:5432", "127.0.0.1:6379", "10.0.2.2:5432", "10.0.2.2:6379"]
    targets += [f"{a}:{p}" for a in host_addresses() for p in (5432, 6379)]
    result = probe(open_sandbox, *targets)
    reached = {t: v for t, v in result.items() if v.startswith("CONNECTED")}
    assert not reached, reached


def test_open_cannot_reach_the_dashboard_port(open_sandbox, dashboard_port):
    targets = [f"127.0.0.1:{dashboard_port}", f"10.0.2.2:{dashboard_port}"]
    targets += [f"{a}:{dashboard_port}" for a in host_addresses()]
    result = probe(open_sandbox, *targets)
    reached = {t: v for t, v in result.items() if v.startswith("CONNECTED")}
    assert not reached, reached


def test_open_cannot_reach_a_private_network_host(open_sandbox):
    with net_host("p", "10.250.7", port=8081, banner="private-host") as host:
        result = probe(open_sandbox, f"{host.address}:{host.port}")
    assert result[f"{host.address}:{host.port}"].startswith("BLOCKED"), result


def test_open_reaches_an_internet_host_through_nat(open_sandbox):
    # 198.51.100.0/24 (TEST-NET-2) is not a private range: it stands for the internet.
    with net_host("i", "198.51.100", port=8082, banner="internet-host") as host:
        result = probe(open_sandbox, f"{host.address}:{host.port}")
    verdict = result[f"{host.address}:{host.port}"]
    assert verdict.startswith("CONNECTED") and "internet-host got:hello" in verdict, result


def test_open_sandbox_has_its_own_network_namespace(open_sandbox):
    r = open_sandbox.run("cat /proc/net/dev", timeout=30)
    assert "eth0" not in r.stdout, r.stdout


def test_open_without_nat_fails_naming_the_missing_feature(backend, monkeypatch, tmp_path):
    """Never the host's network instead: no NAT, no ``open`` sandbox."""
    from snapshots.sandbox.base import SandboxError
    from snapshots.sandbox.local import LocalBackend

    fresh = LocalBackend(tmp_path / "fresh", runtime=backend.runtime)
    (tmp_path / "tree").mkdir()
    snap = fresh.snapshot_from_directory(str(tmp_path / "tree"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no slirp4netns to be found
    with pytest.raises(SandboxError, match="slirp4netns is not installed"):
        fresh.create(snapshot=snap, network=NetworkPolicy("open"))
    assert fresh.list_sandboxes() == []
    monkeypatch.undo()
    # none still works: it needs no NAT.
    sb = fresh.create(snapshot=snap, network=NetworkPolicy("none"))
    try:
        assert sb.run("true").ok
    finally:
        sb.terminate()


def test_the_hosts_own_connections_are_untouched_by_the_deny_list(open_sandbox):
    """The host table confines only the NAT's sockets: the host's own connection to a closed
    local port is still refused at once (its RST has no socket and once hit the rejects, so
    every such connect hung until its timeout)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # bound, never listening: a closed port
        with socket.socket() as client:
            client.settimeout(3)
            with pytest.raises(ConnectionRefusedError):
                client.connect(("127.0.0.1", closed_port))
