"""Limits stop runaway commands and say which limit did it; the sandbox survives."""

from __future__ import annotations

import time

import pytest

from snapshots.sandbox.base import LimitExceeded, Limits


def test_timeout_kills_and_reports_wall_time(sandbox):
    start = time.monotonic()
    r = sandbox.run("echo started; sleep 30; echo never", timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.timed_out and r.limit_hit == "wall_time"
    assert r.exit_code != 0
    assert "started" in r.stdout and "never" not in r.stdout
    assert sandbox.run("echo alive").stdout == "alive\n"


def test_limits_wall_seconds_caps_every_exec(new_sandbox):
    sb = new_sandbox(limits=Limits(wall_seconds=0.5))
    r = sb.run("sleep 20", timeout=100)  # the exec cannot ask for more than the sandbox allows
    assert r.timed_out and r.limit_hit == "wall_time"
    assert r.duration_s < 5


def test_timeout_kills_children_too(sandbox):
    r = sandbox.run("sh -c 'sleep 60; echo child-survived > /workspace/child' & wait", timeout=0.5)
    assert r.timed_out
    time.sleep(0.1)
    assert "sleep 60" not in sandbox.run("ps -eo args").stdout


def test_memory_limit_kills_and_reports_memory(new_sandbox, caps):
    sb = new_sandbox(limits=Limits(memory_mb=64))
    r = sb.run(
        "python3 -c \"b = bytearray(400 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]);"
        " print('allocated')\""
    )
    assert r.limit_hit == "memory"
    assert r.exit_code == 137
    assert "allocated" not in r.stdout
    if "survives_oom" in caps:
        assert sb.run("echo alive").stdout == "alive\n"


def test_pids_limit_reports_pids(new_sandbox, caps):
    sb = new_sandbox(limits=Limits(pids=40))
    r = sb.run("for i in $(seq 100); do sleep 3 & done; ps -e | wc -l; wait")
    # The fork bomb is contained, whatever the backend says about it.
    assert "Cannot fork" in r.stderr or "Resource temporarily unavailable" in r.stderr
    if "pids_attribution" in caps:
        assert r.limit_hit == "pids"
    # Once the sleeps are gone the sandbox is usable again.
    deadline = time.monotonic() + 10
    while True:
        try:
            if sb.run("echo alive").stdout == "alive\n":
                break
        except LimitExceeded:
            pass
        assert time.monotonic() < deadline
        time.sleep(0.3)


def test_cpu_limit_throttles(new_sandbox, caps):
    if "cgroups" not in caps:
        pytest.skip("CPU bandwidth is only measurable with cgroups")
    sb = new_sandbox(limits=Limits(cpus=0.2))
    r = sb.run(
        'python3 -c "import time,os\nt=time.time()\nwhile time.time()-t<1.0: pass\n'
        'print(os.times().user + os.times().system)"'
    )
    cpu = float(r.stdout.strip())
    assert cpu < 0.5, f"used {cpu:.2f}s CPU in 1s wall with cpus=0.2"
