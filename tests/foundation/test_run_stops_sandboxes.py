"""Ctrl-C on `make run` leaves no sandbox behind: a sandbox is not a child of the worker that
started it (it must outlive a worker), so the supervisor terminates them itself once the workers
have stopped: no sandbox process, no overlay or disk mount (in any mount namespace: a running
sandbox's mounts are in its own only, snapshots/sandbox/host_mounts.py), no loop device, no
embedded Redis."""

import os
import shutil
import time
from pathlib import Path

import psutil
import pytest

from tests.foundation.test_run_command import (
    free_port,
    start,
    stop_reading,
    supervisor_env,
    wait_until_up,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("bwrap"), reason="local sandboxes need root and bwrap"
)


def mounted(path: Path) -> bool:
    return any(
        line.split()[1] == str(path) for line in Path("/proc/self/mounts").read_text().splitlines()
    )


def namespaces_mounting(sandbox_id: str) -> set[str]:
    """The mount namespaces (of any live process) holding a mount of the sandbox's overlay or
    disk (their sources and options name its id)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if sandbox_id in (proc / "mountinfo").read_text():
                found.add(os.readlink(proc / "ns" / "mnt"))
        except OSError:
            continue
    return found


def loop_backing(device: str) -> str:
    """The loop device's backing file; "" once it detached itself (its last mount went)."""
    try:
        return (Path("/sys/block") / Path(device).name / "loop" / "backing_file").read_text()
    except OSError:
        return ""  # detached


def test_ctrl_c_terminates_live_sandboxes_and_their_mounts(tmp_path):
    from snapshots.sandbox.local import LocalBackend

    process = start(supervisor_env(tmp_path, free_port()))
    backend = None
    try:
        wait_until_up(process)
        redis_pids = [
            p for p in psutil.Process(process.pid).children(True) if "redis-server" in p.name()
        ]
        # Two sandboxes as a worker leaves them between turns, in the supervisor's sandbox root
        # (INSPECT_SANDBOX_ROOT's default), each with a background process of its own.
        backend = LocalBackend(tmp_path / "sandbox", runtime="bwrap")
        tree = tmp_path / "tree"
        tree.mkdir()
        (tree / "README.md").write_text("# demo\n")
        snapshot = backend.snapshot_from_directory(str(tree))
        sandboxes = [backend.create(snapshot=snapshot) for _ in range(2)]
        inits, devices = [], []
        for sandbox in sandboxes:
            sandbox.run("sleep 300 > /dev/null 2>&1 &")
            state = backend._read_state(sandbox.id)
            init = psutil.Process(state["init_pid"])
            devices.append(state["disk_device"])
            inits += [init, *init.children(recursive=True)]  # the sleep among them
            # Its workspace is mounted in its own namespace only, not in the host's table.
            assert not mounted(backend.mount_base / sandbox.id)
            assert namespaces_mounting(sandbox.id) == {os.readlink(f"/proc/{init.pid}/ns/mnt")}
            assert str(sandbox.id) in loop_backing(state["disk_device"])
        assert sum(p.cmdline() == ["sleep", "300"] for p in inits) == 2
    finally:
        code, alive, output = stop_reading(process)
        left = backend.list_sandboxes() if backend else []
        for sandbox_id in left:  # the test leaves nothing behind either way
            backend.attach(sandbox_id).terminate()
    assert code == 0, output
    assert left == []
    assert alive == []
    assert "Stopped 2 sandbox(es)." in output
    for init in inits:
        assert not init.is_running() or init.status() == psutil.STATUS_ZOMBIE
    for sandbox, device in zip(sandboxes, devices, strict=True):
        assert not mounted(backend.mount_base / sandbox.id)
        assert namespaces_mounting(sandbox.id) == set()
        for _ in range(50):  # the kernel detaches it as the namespace's last mount goes
            if sandbox.id not in loop_backing(device):
                break
            time.sleep(0.1)
        assert sandbox.id not in loop_backing(device)
        assert not (backend.sandboxes_dir / sandbox.id).exists()
    assert redis_pids and not any(p.is_running() for p in redis_pids)
