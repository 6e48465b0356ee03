"""The data directory's disk fills up during a snapshot build: the build fails saying so, the last
good snapshot keeps serving, nothing half-written is kept or used, and once there is room again
the next build succeeds. The data directory (and the sandbox root in it) is a small tmpfs."""

import json
import os
import shutil
import subprocess

import pytest

from snapshots import backends
from snapshots.models import Snapshot
from snapshots.restore import newest_ready

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        os.geteuid() != 0 or not shutil.which("bwrap"), reason="needs root (tmpfs) and bwrap"
    ),
]

BIG = 6 * 1024 * 1024  # what the second build's setup writes


@pytest.fixture
def small_disk(tmp_path, settings, monkeypatch):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0755", "inspect-test-disk", str(disk)],
        check=True,
    )
    settings.DATA_DIR = disk / "data"
    settings.DATA_DIR.mkdir()
    settings.SANDBOX_ROOT = disk / "sandbox"
    settings.SANDBOX_DISK_BYTES = 0  # setup writes straight to this disk (no per-sandbox image)
    monkeypatch.setattr(backends, "_backends", {})  # a backend on this disk, for this test
    yield disk
    backend = backends.sandbox_backend()
    for sandbox_id in backend.list_sandboxes():
        backend.attach(sandbox_id).terminate()
    backend.reap()
    subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk, leave: int):
    """Take all but `leave` bytes of the disk."""
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    with open(disk / "filler", "wb") as out:
        out.truncate(0)
        chunk = b"\0" * (1024 * 1024)
        left = free - leave
        while left > 0:
            left -= out.write(chunk[: min(len(chunk), left)])
    return disk / "filler"


def refresh(inspect_cli):
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    return code, json.loads(out.strip().splitlines()[-1]), err


def test_a_full_disk_fails_the_build_clearly_and_the_last_good_snapshot_serves(
    inspect_cli, widgets, small_disk
):
    code, good, err = refresh(inspect_cli)
    assert code == 0, err
    widgets.upstream.commit(
        {".inspect/environment.toml": f'setup = ["head -c {BIG} /dev/urandom > big.bin"]\n'}
    )
    # Room for setup to write its file, not for the snapshot to copy it into a layer.
    filler = fill(small_disk, leave=BIG + 2 * 1024 * 1024)

    code, bad, err = refresh(inspect_cli)
    assert code == 1
    assert bad["state"] == "failed"
    assert "disk is full" in bad["error"], bad["error"]
    assert "disk is full" in Snapshot.objects.get(pk=bad["id"]).log
    assert newest_ready(widgets).pk == good["id"]

    store = backends.sandbox_backend().store
    assert list(store.tmp_dir.iterdir()) == []  # no half-copied layer left behind
    for layer in store.layers_dir.iterdir():
        assert not (layer / "big.bin").exists(), "a layer of the failed build was kept"
    assert not list(store.snapshots_dir.glob(".*"))

    # The last good snapshot serves new sandboxes while the disk is still full.
    code, out, err = inspect_cli("sandbox", "exec", "widgets", "--", "cat", "setup.log")
    assert code == 0, err
    assert out.splitlines()[0] == "setup-ran"

    filler.unlink()
    code, fixed, err = refresh(inspect_cli)
    assert code == 0, err
    code, out, err = inspect_cli("sandbox", "exec", "widgets", "--", "stat", "-c", "%s", "big.bin")
    assert code == 0, err
    assert out.split() == [str(BIG)]
    assert newest_ready(widgets).pk == fixed["id"]
