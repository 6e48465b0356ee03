"""terminate() ends everything the sandbox started and can be called again safely."""

from __future__ import annotations

import os
import time

import pytest

from snapshots.sandbox.base import SandboxGone


def _host_pids_with(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def test_terminate_kills_processes_and_is_idempotent(backend, new_sandbox, caps):
    sb = new_sandbox()
    sb.run("sleep 4242.5 & (sleep 4343.5 &) ; nohup sleep 4444.5 >/dev/null 2>&1 &")
    if "host_processes" in caps:
        assert _host_pids_with("4242.5"), "background process not found on the host"
    sb.terminate()
    sb.terminate()
    assert not sb.is_alive()
    with pytest.raises(SandboxGone):
        sb.run("true")
    with pytest.raises(SandboxGone):
        backend.attach(sb.id)
    assert sb.id not in backend.list_sandboxes()
    if "host_processes" in caps:
        time.sleep(0.2)
        for marker in ("4242.5", "4343.5", "4444.5"):
            assert _host_pids_with(marker) == [], f"{marker} survived terminate()"


def test_terminate_releases_local_resources(backend, new_sandbox, caps):
    if "local_layout" not in caps:
        pytest.skip("local backend layout")
    sb = new_sandbox()
    sdir = backend.sandboxes_dir / sb.id
    merged = str(sdir / "merged")
    assert sdir.exists()
    sb.terminate()
    assert not sdir.exists()
    with open("/proc/self/mountinfo") as fh:
        assert merged not in fh.read()


def test_terminate_during_a_running_command(new_sandbox):
    sb = new_sandbox()
    h = sb.exec("echo go; sleep 60")
    assert next(iter(h)).text == "go"
    start = time.monotonic()
    sb.terminate()
    with pytest.raises(SandboxGone):
        h.wait()
    assert time.monotonic() - start < 5


def test_sandbox_lifetime_limit(new_sandbox):
    from snapshots.sandbox.base import Limits

    sb = new_sandbox(limits=Limits(lifetime_seconds=0.5))
    assert sb.run("echo up").stdout == "up\n"
    deadline = time.monotonic() + 10
    while sb.is_alive():
        assert time.monotonic() < deadline, "lifetime limit not enforced"
        time.sleep(0.1)
    with pytest.raises(SandboxGone):
        sb.run("true")
