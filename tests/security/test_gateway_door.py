"""Attacks on the model gateway's door, from a workload inside a sandbox with egress ``none``.

The door is the gateway's socket directory, mounted read-only at /run/inspect-gateway, and a
forwarder from 127.0.0.1:GATEWAY_PORT to that one socket (snapshots/sandbox/gateway_door.py). A
workload must not be able to replace the socket (to catch the next turn's token), write into the
directory, use the door to reach anything else of the host, or take the door's port over; with
the gateway down it gets a 503 saying so. Runs on bubblewrap and gVisor.

The gateway is a stand-in on the configured socket (tests/snapshots/sandbox/gateway_standin.py):
the real one was built in parallel; the lead switches this to the real gateway's fixture.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator

import pytest

from snapshots.sandbox.base import GATEWAY_PORT, Limits, NetworkPolicy, Sandbox, SandboxError
from snapshots.sandbox.gateway_door import GATEWAY_MOUNT
from tests.nethosts import banner_server
from tests.snapshots.sandbox.gateway_standin import StandinGateway

RUNTIMES = ["bwrap", "runsc"]
SOCKET = f"{GATEWAY_MOUNT}/gateway.sock"

# Each attempt prints "<name> OK" if it worked or "<name> REFUSED <error>" if it did not.
TAMPER = f"""
import os, socket, subprocess
SOCK = {SOCKET!r}
DIR = {GATEWAY_MOUNT!r}
def attempt(name, fn):
    try:
        fn(); print(name, "OK")
    except Exception as e:
        print(name, "REFUSED", type(e).__name__, e)
def bind_fake(path):
    s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(1)
def remount_rw():
    r = subprocess.run(["unshare", "-Urm", "sh", "-c",
                        "mount -o remount,rw,bind " + DIR + " && rm -f " + SOCK],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise OSError(r.returncode, r.stderr.strip())
attempt("unlink", lambda: os.unlink(SOCK))
attempt("rename_away", lambda: os.rename(SOCK, DIR + "/old.sock"))
attempt("bind_over", lambda: bind_fake(SOCK))
attempt("bind_beside", lambda: bind_fake(DIR + "/fake.sock"))
attempt("create_file", lambda: open(DIR + "/planted", "w").close())
attempt("mkdir", lambda: os.mkdir(DIR + "/d"))
attempt("symlink", lambda: os.symlink("/tmp/x", DIR + "/gateway.sock.new"))
attempt("chmod_socket", lambda: os.chmod(SOCK, 0o600))
attempt("chmod_dir", lambda: os.chmod(DIR, 0o777))
attempt("remount_rw", remount_rw)
attempt("move_the_mount", lambda: os.rename(DIR, "/run/elsewhere"))
attempt("remove_the_mount", lambda: os.rmdir(DIR))
"""

FETCH = (
    "import sys, urllib.request as u, urllib.error as e\n"
    "try:\n"
    "    r = u.urlopen(sys.argv[1], timeout=10); print(r.status, r.read().decode())\n"
    "except e.HTTPError as x:\n"
    "    print(x.code, x.read().decode())\n"
)

# Raw requests through the door that a proxy would carry elsewhere; prints what came back.
RAW = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode())
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode(errors="replace"))
"""


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
    root = tmp_path_factory.mktemp("door")
    be = LocalBackend(
        root / request.param,
        runtime=request.param,
        gateway_socket=root / "data" / "gateway" / "gateway.sock",
    )
    yield be
    for sid in be.list_sandboxes():
        be.attach(sid).terminate()
    be.reap()


@pytest.fixture
def gateway(backend) -> Iterator[StandinGateway]:
    gw = StandinGateway(backend.gateway_socket).start()
    yield gw
    gw.stop()


@pytest.fixture
def sandbox(backend, tmp_path) -> Iterator[Sandbox]:
    (tmp_path / "tamper.py").write_text(TAMPER)
    (tmp_path / "fetch.py").write_text(FETCH)
    (tmp_path / "raw.py").write_text(RAW)
    snap = backend.snapshot_from_directory(str(tmp_path))
    sb = backend.create(
        snapshot=snap,
        network=NetworkPolicy("none"),
        limits=Limits(wall_seconds=120, memory_mb=1024, pids=256),
    )
    yield sb
    sb.terminate()


def fetch(sb: Sandbox, path: str = "/healthz") -> tuple[int, dict]:
    r = sb.run(["python3", "fetch.py", f"http://127.0.0.1:{GATEWAY_PORT}{path}"], timeout=60)
    assert r.exit_code == 0, r.stdout + r.stderr
    status, body = r.stdout.split(" ", 1)
    return int(status), json.loads(body)


def test_the_workload_cannot_replace_the_socket_or_write_beside_it(backend, gateway, sandbox):
    before = os.stat(backend.gateway_socket)
    listing = sorted(os.listdir(backend.gateway_socket.parent))

    r = sandbox.run(["python3", "tamper.py"], timeout=60)

    results = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert len(results) == 12, r.stdout + r.stderr
    worked = {name: outcome for name, outcome in results.items() if outcome == "OK"}
    assert worked == {}, results
    after = os.stat(backend.gateway_socket)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert sorted(os.listdir(backend.gateway_socket.parent)) == listing
    assert fetch(sandbox)[0] == 200  # the real gateway still answers the next turn


def test_the_door_leads_to_the_gateway_only(backend, gateway, sandbox):
    """Neither a proxy request nor a CONNECT through the door reaches a host loopback service
    (PostgreSQL and Redis listen there), and the host's loopback stays out of reach directly."""
    with banner_server("127.0.0.1", b"host-service-banner") as port:
        attempts = [
            f"CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n\\r\\n",
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n"
            "Connection: close\\r\\n\\r\\n",
        ]
        answers = [
            sandbox.run(["python3", "raw.py", str(GATEWAY_PORT), raw], timeout=60).stdout
            for raw in attempts
        ]
        direct = sandbox.run(["python3", "raw.py", str(port), "hello"], timeout=60)

    assert all("host-service-banner" not in a for a in answers), answers
    assert answers[0].startswith("HTTP/1.") and " 501 " in answers[0].split("\r\n")[0]
    assert json.loads(answers[1].split("\r\n\r\n", 1)[1])["standin_gateway"] is True
    assert gateway.seen == [f"GET http://127.0.0.1:{port}/"]  # it went to the gateway
    assert direct.exit_code != 0 and "host-service-banner" not in direct.stdout
    assert "Connection refused" in direct.stderr or "ConnectionRefused" in direct.stderr


def test_the_mount_shows_nothing_of_the_host_beside_the_socket(backend, gateway, sandbox):
    canary = backend.gateway_socket.parent.parent / "canary.txt"
    canary.write_text("host data beside the gateway's directory")

    r = sandbox.run(
        # Python, not ls: this gVisor build's statx() breaks `ls DIR` (runsc.known_issues).
        f"python3 -c 'import os; print(os.listdir(\"{GATEWAY_MOUNT}\"))'; "
        f"cat {GATEWAY_MOUNT}/../canary.txt; "
        f"find / -name canary.txt -not -path '/proc/*' 2>/dev/null; echo done",
        timeout=60,
    )

    assert "host data" not in r.stdout
    assert "canary.txt" not in r.stdout
    assert "gateway.sock" in r.stdout and r.stdout.rstrip().endswith("done")


def test_the_workload_cannot_take_the_doors_port(gateway, sandbox):
    r = sandbox.run(
        [
            "python3",
            "-c",
            "import socket\n"
            "for host in ('127.0.0.1', '0.0.0.0'):\n"
            "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "    try:\n"
            f"        s.bind((host, {GATEWAY_PORT})); s.listen(1); print(host, 'BOUND')\n"
            "    except OSError as e:\n"
            "        print(host, 'REFUSED', e)\n",
        ],
        timeout=60,
    )

    assert "127.0.0.1 REFUSED" in r.stdout, r.stdout + r.stderr
    assert fetch(sandbox) == (200, {"ok": True, "generation": 1})


@pytest.mark.parametrize("how", ["never_started", "crashed"])
def test_a_gateway_that_is_down_answers_503_with_a_message(backend, sandbox, how):
    if how == "crashed":
        StandinGateway(backend.gateway_socket).start().stop()  # a socket nobody listens on
    else:
        backend.gateway_socket.unlink(missing_ok=True)

    status, body = fetch(sandbox, "/anthropic/v1/messages")

    assert status == 503
    error = body["error"]
    assert error["type"] == "gateway_unavailable"
    assert "model gateway is not running" in error["message"]


def test_a_socket_directory_shared_with_other_files_is_never_mounted(backend, tmp_path):
    """INSPECT_GATEWAY_SOCKET put in a directory holding other files (say /tmp, or the data dir
    itself) would show them to every sandbox: no sandbox starts, and the message says why."""
    from snapshots.sandbox.local import LocalBackend  # why: built like the module's backend

    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "secret_key").write_text("the platform's signing key")
    careless = LocalBackend(
        backend.root.parent / f"{backend.runtime}-careless",
        runtime=backend.runtime,
        gateway_socket=shared / "gateway.sock",
    )

    with pytest.raises(SandboxError) as refused:
        careless.create(snapshot=None, network=NetworkPolicy("none"))

    assert "holds more than the gateway's socket (secret_key)" in str(refused.value)
    assert "INSPECT_GATEWAY_SOCKET a directory of its own" in str(refused.value)
    assert careless.list_sandboxes() == []
    assert list(careless.sandboxes_dir.iterdir()) == []  # nothing half-made
    with open("/proc/self/mountinfo") as fh:
        mounts = [line.split()[4] for line in fh]
    assert not [m for m in mounts if m.startswith(f"{careless.mount_base}/")], mounts


def test_a_gateway_socket_that_cannot_be_placed_is_a_clear_refusal(backend, tmp_path):
    from snapshots.sandbox.local import LocalBackend  # why: built like the module's backend

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    misplaced = LocalBackend(
        backend.root.parent / f"{backend.runtime}-misplaced",
        runtime=backend.runtime,
        gateway_socket=blocker / "gateway" / "gateway.sock",
    )

    with pytest.raises(SandboxError) as refused:
        misplaced.create(snapshot=None, network=NetworkPolicy("none"))

    assert "cannot make the gateway socket's directory" in str(refused.value)
    assert "check INSPECT_GATEWAY_SOCKET" in str(refused.value)
    assert list(misplaced.sandboxes_dir.iterdir()) == []
