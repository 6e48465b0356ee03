"""Ctrl-C of `make run` leaves no warm-pool sandbox and no mount of one behind."""

import os
import time
from pathlib import Path

import pytest
import redis

from snapshots.sandbox.local import LocalBackend
from tests.foundation.test_run_command import (
    free_port,
    start,
    stop_reading,
    supervisor_env,
    wait_until_up,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")


def test_ctrl_c_terminates_the_idle_pool_sandboxes(tmp_path):
    process = start(supervisor_env(tmp_path, free_port()))
    try:
        wait_until_up(process)
        # A pool sandbox as the pool makes one: in the system's sandbox root, a pool member.
        backend = LocalBackend(root=tmp_path / "sandbox")
        tree = tmp_path / "tree"
        tree.mkdir()
        (tree / "README.md").write_text("# w\n")
        sandbox = backend.create(snapshot=backend.snapshot_from_directory(tree))
        client = redis.Redis(unix_socket_path=str(tmp_path / "redis.sock"))
        client.zadd("inspect:pool:members", {sandbox.id: time.time()})
        client.close()
        assert sandbox.is_alive()
    finally:
        code, alive, output = stop_reading(process)
    assert (code, alive) == (0, [])
    assert "warm pools: terminated 1 idle sandboxes" in output
    assert not sandbox.is_alive()
    assert not (backend.mount_base / sandbox.id).exists()
    assert sandbox.id not in Path("/proc/mounts").read_text()
