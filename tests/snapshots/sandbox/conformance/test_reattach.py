"""A sandbox is a live thing: it outlives commands and the worker that created it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from snapshots.sandbox.base import SandboxGone

ROOT = Path(__file__).resolve().parents[4]


def test_background_processes_survive_between_execs(sandbox):
    sandbox.run("sleep 300 & echo $! > /tmp/bg.pid; echo state > /tmp/state")
    pid = sandbox.run("cat /tmp/bg.pid").stdout.strip()
    assert sandbox.run(f"kill -0 {pid} && cat /tmp/state").stdout == "state\n"


def test_daemon_keeps_serving(sandbox):
    sandbox.run("python3 -m http.server 8100 --bind 127.0.0.1 > /tmp/http.log 2>&1 &")
    probe = (
        'for i in $(seq 50); do python3 -c "import urllib.request as u;'
        "print(u.urlopen('http://127.0.0.1:8100/README.md').read().decode())\" "
        "2>/dev/null && break; sleep 0.1; done"
    )
    assert "# demo" in sandbox.run(probe).stdout
    assert "# demo" in sandbox.run(probe).stdout  # still up for the next exec


def test_reattach_from_a_fresh_backend_object(backend_spec, backend, sandbox):
    sandbox.run("sleep 300 & echo $! > /tmp/bg.pid")
    fresh = backend_spec.make(Path(getattr(backend, "root", "/nonexistent")).parent)
    again = fresh.attach(sandbox.id)
    pid = again.run("cat /tmp/bg.pid").stdout.strip()
    assert again.run(f"kill -0 {pid}").exit_code == 0
    again.write_file("via-fresh.txt", b"x")
    assert sandbox.read_file("via-fresh.txt") == b"x"


def test_reattach_from_another_process(backend_spec, backend, sandbox, caps):
    if "local_layout" not in caps:
        pytest.skip("spawns a second Python process with the local backend")
    sandbox.run("echo before > /tmp/mark; sleep 300 &")
    code = (
        "import json, sys\n"
        "from snapshots.sandbox.local import LocalBackend\n"
        "b = LocalBackend(sys.argv[1], runtime=sys.argv[2])\n"
        "sb = b.attach(sys.argv[3])\n"
        "r = sb.run('cat /tmp/mark; ps -eo args | grep -c \"^sleep 300\"')\n"
        "sb.run('echo after > /tmp/mark2')\n"
        "print(json.dumps({'out': r.stdout, 'code': r.exit_code}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(backend.root), backend.runtime, sandbox.id],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["out"] == "before\n1\n"
    assert sandbox.run("cat /tmp/mark2").stdout == "after\n"


def test_attach_unknown_or_dead(backend, new_sandbox):
    with pytest.raises(SandboxGone):
        backend.attach("no-such-sandbox")
    sb = new_sandbox()
    sb.terminate()
    with pytest.raises(SandboxGone):
        backend.attach(sb.id)


def test_list_sandboxes(backend, new_sandbox):
    sb = new_sandbox()
    assert sb.id in backend.list_sandboxes()
