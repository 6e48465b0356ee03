"""snapshot() freezes exactly what the workspace holds; create() restores exactly it."""

from __future__ import annotations

import pytest

from snapshots.sandbox.base import SnapshotNotFound

LIST = (
    "cd /workspace && find . -mindepth 1 \\( -type l -printf '%p -> %l\\n' \\) -o "
    "\\( -type f -printf '%p %s %m\\n' \\) -o \\( -type d -printf '%p/\\n' \\) | sort; "
    "find . -type f -exec md5sum {} + | sort -k2"
)


def test_roundtrip_with_changes_and_deletions(new_sandbox):
    a = new_sandbox()
    r = a.run(
        "set -e; echo changed > README.md; rm src/pkg/mod.py; rm -r docs; "
        "mkdir -p new/deep && echo n > new/deep/file; mv data.bin renamed.bin; "
        "chmod 700 new/deep/file; ln -sf renamed.bin link-to-data; rm link-to-readme"
    )
    assert r.exit_code == 0, r.stderr
    before = a.run(LIST).stdout
    ref = a.snapshot()
    b = new_sandbox(snapshot=ref)
    after = b.run(LIST).stdout
    assert after == before
    assert b.read_file("README.md") == b"changed\n"
    assert b.run("test ! -e src/pkg/mod.py && test ! -e docs && test ! -e data.bin").exit_code == 0
    assert b.run("find new/deep/file -printf '%m\\n'").stdout == "700\n"


def test_original_snapshot_is_untouched(new_sandbox, base_snapshot):
    a = new_sandbox()
    a.run("rm README.md; echo x > extra")
    a.snapshot()
    fresh = new_sandbox(snapshot=base_snapshot)
    assert fresh.read_file("README.md") == b"# demo\n"
    assert fresh.run("test -e extra").exit_code != 0


def test_layered_snapshots_and_deleting_a_base_file_again(new_sandbox):
    a = new_sandbox()
    a.run("echo one > layer1.txt; rm -r docs")
    ref1 = a.snapshot()
    b = new_sandbox(snapshot=ref1)
    b.run("echo two > layer2.txt; rm layer1.txt; mkdir docs; echo re > docs/recreated")
    ref2 = b.snapshot()
    c = new_sandbox(snapshot=ref2)
    names = {e.name for e in c.list_files("")}
    assert "layer2.txt" in names and "layer1.txt" not in names
    # A directory deleted in one layer and recreated in the next must not resurrect old files.
    assert [e.name for e in c.list_files("docs")] == ["recreated"]
    # Several generations stay correct (deep stacks are flattened: see test_local_layers).
    sb = c
    for i in range(5):
        sb.run(f"echo {i} > gen.txt; rm -f gen{i - 1}; touch gen{i}")
        sb = new_sandbox(snapshot=sb.snapshot())
    assert sb.read_file("gen.txt") == b"4\n"
    assert sorted(e.name for e in sb.list_files("") if e.name.startswith("gen")) == [
        "gen.txt",
        "gen4",
    ]


def test_snapshot_of_live_sandbox_keeps_it_running(new_sandbox):
    a = new_sandbox()
    a.run("sleep 300 & echo $! > /tmp/pid")
    a.snapshot()
    pid = a.run("cat /tmp/pid").stdout.strip()
    assert a.run(f"kill -0 {pid}").exit_code == 0
    assert a.run("echo still-writable > w && cat w").stdout == "still-writable\n"


def test_unchanged_snapshot_and_delete(backend, new_sandbox):
    a = new_sandbox()
    ref = a.snapshot()
    b = new_sandbox(snapshot=ref)
    assert b.read_file("README.md") == b"# demo\n"
    backend.delete_snapshot(ref)
    backend.delete_snapshot(ref)  # idempotent
    with pytest.raises(SnapshotNotFound):
        new_sandbox(snapshot=ref)
    # Sandboxes restored from a deleted snapshot keep working.
    assert b.read_file("README.md") == b"# demo\n"


def test_snapshot_from_directory(backend, new_sandbox, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("from host\n")
    ref = backend.snapshot_from_directory(str(tmp_path))
    sb = new_sandbox(snapshot=ref)
    assert sb.read_file("a/f.txt") == b"from host\n"
    # Files came from the host but the sandbox user owns them: it can edit them.
    assert sb.run("echo edited >> a/f.txt && cat a/f.txt").stdout == "from host\nedited\n"
    (tmp_path / "a" / "f.txt").write_text("host changed later\n")
    assert new_sandbox(snapshot=ref).read_file("a/f.txt") == b"from host\n"


def test_empty_workspace(backend, new_sandbox):
    sb = new_sandbox(snapshot=None)
    assert sb.list_files("") == []
    sb.write_file("x", b"1")
    assert sb.read_file("x") == b"1"
