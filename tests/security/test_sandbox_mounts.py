"""Red team, mounts: a running sandbox's workspace, disk and gateway door are mounted in its own
mount namespace only (snapshots/sandbox/host_mounts.py), never in the host's table, from which
every new sandbox's namespace is copied; so no sandbox's namespace is ever made holding another
sandbox's mounts, and no sandbox can name, see or reach another's. (The host's copies were
detached for density: restores no longer slow down as sandboxes accumulate.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from snapshots.sandbox.base import Limits, NetworkPolicy, SandboxGone
from snapshots.sandbox.host_mounts import disk_on_host

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("bwrap"), reason="local sandboxes need root and bwrap"
)

MARK = "only-for-sandbox-a-" + "7" * 16


@pytest.fixture
def backend(tmp_path):
    from snapshots.sandbox.local import LocalBackend

    be = LocalBackend(tmp_path / "sb", runtime="bwrap")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "README.md").write_text("# demo\n")
    be.base = be.snapshot_from_directory(str(tree))  # type: ignore[attr-defined]
    yield be
    for sid in be.list_sandboxes():
        be.attach(sid).terminate()
    be.reap()


def create(backend):
    return backend.create(
        snapshot=backend.base,
        network=NetworkPolicy("none"),
        limits=Limits(wall_seconds=60, memory_mb=512, pids=128),
    )


def host_table() -> str:
    return Path("/proc/self/mountinfo").read_text()


def test_no_sandbox_mount_is_left_in_the_hosts_table(backend):
    a = create(backend)
    a.write_file("secret.txt", MARK.encode())
    # What every later sandbox's namespace is copied from names none of a's mounts.
    table = host_table()
    assert a.id not in table
    assert a.state["disk_device"] + " " not in table
    # a's own namespace holds them, and they work: workspace, disk-backed /tmp.
    ns = Path(f"/proc/{a.state['init_pid']}/mountinfo").read_text()
    assert a.id in ns
    assert a.run("cat secret.txt; echo x > /tmp/x && cat /tmp/x").stdout == MARK + "x\n"


def test_a_sandbox_cannot_see_or_reach_another_sandboxs_mounts(backend):
    a = create(backend)
    a.write_file("secret.txt", MARK.encode())
    b = create(backend)
    probe = f"""
import glob, os
found = []
table = open('/proc/self/mountinfo').read()
for word in ({a.id!r}, {a.state["disk_device"] + " "!r}):
    if word in table:
        found.append('MOUNTINFO ' + word)
for path in ({a.state["workspace"]!r}, {a.state["disk"]!r}, '/run/inspect-sandboxes'):
    if os.path.exists(path):
        found.append('PATH ' + path)
for root in glob.glob('/proc/[0-9]*/root'):
    try:
        if {MARK!r} in open(root + '/workspace/secret.txt').read():
            found.append('READ ' + root)
    except OSError:
        pass
print(found or 'CLEAN')
"""
    r = b.run(["/usr/bin/python3", "-c", probe], timeout=30)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == "CLEAN", r.stdout
    # and a's workspace is still its own
    assert a.read_file("secret.txt") == MARK.encode()


def test_a_snapshot_reads_the_sandboxs_own_disk_or_nothing(backend):
    # A snapshot mounts the sandbox's loop device again; a device that is not the one its /tmp
    # is on (freed and taken by another sandbox) must never be read as its disk.
    a = create(backend)
    b = create(backend)
    b.write_file("theirs.txt", MARK.encode())
    forged = {**a.state, "disk_device": b.state["disk_device"]}
    with pytest.raises(SandboxGone), disk_on_host(forged):
        pytest.fail("another sandbox's disk was mounted as a's")
    ended = dict(a.state)
    a.terminate()
    with pytest.raises(SandboxGone), disk_on_host(ended):
        pytest.fail("an ended sandbox's disk was mounted")
    assert b.id not in host_table() and a.id not in host_table()
    with disk_on_host(b.state):  # its own: there while a snapshot reads it, then gone again
        assert (Path(b.state["disk"]) / "upper" / "theirs.txt").read_text() == MARK
    assert b.id not in host_table()
