"""The file API works on the workspace and refuses to leave it."""

from __future__ import annotations

import pytest

from snapshots.sandbox.base import PathEscapesWorkspace


def test_write_read_roundtrip_is_visible_to_commands(sandbox):
    data = bytes(range(256)) * 100
    sandbox.write_file("new/dir/blob.bin", data)
    assert sandbox.read_file("new/dir/blob.bin") == data
    assert sandbox.read_file("/workspace/new/dir/blob.bin") == data
    sandbox.write_file("hello.txt", b"hi\n")
    assert sandbox.run("cat hello.txt").stdout == "hi\n"
    sandbox.run("echo from-exec > made.txt")
    assert sandbox.read_file("made.txt") == b"from-exec\n"


def test_snapshot_contents_and_listing(sandbox):
    assert sandbox.read_file("README.md") == b"# demo\n"
    entries = {e.name: e for e in sandbox.list_files("")}
    assert {"README.md", "src", "docs", "data.bin", "link-to-readme"} <= set(entries)
    assert entries["src"].is_dir and entries["src"].kind == "dir"
    assert entries["link-to-readme"].kind == "symlink"
    assert entries["data.bin"].size == 1024
    sub = sandbox.list_files("src/pkg")
    assert [e.path for e in sub] == ["src/pkg/__init__.py", "src/pkg/mod.py"]
    assert sandbox.read_file("link-to-readme") == b"# demo\n"  # symlinks inside are fine


def test_paths_outside_are_refused(sandbox):
    for path in (
        "../etc/passwd",
        "src/../../etc/passwd",
        "/etc/passwd",
        "/workspace/../etc/passwd",
        "/tmp/x",
        "/",
    ):
        with pytest.raises(PathEscapesWorkspace):
            sandbox.read_file(path)
        with pytest.raises(PathEscapesWorkspace):
            sandbox.write_file(path, b"x")
        with pytest.raises(PathEscapesWorkspace):
            sandbox.list_files(path)
    assert sandbox.run("test -e /tmp/x").exit_code == 1


def test_symlink_escapes_are_refused(sandbox):
    sandbox.run(
        "ln -s /etc etc-link; ln -s ../../../../etc/passwd pw-link; "
        "ln -s /tmp tmp-link; mkdir -p d && ln -s .. d/up"
    )
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_file("etc-link/passwd")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_file("pw-link")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.write_file("tmp-link/owned", b"x")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.write_file("pw-link", b"x")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.list_files("etc-link")
    assert sandbox.run("test -e /tmp/owned").exit_code != 0
    # d/up -> .. stays inside the workspace: allowed.
    assert sandbox.read_file("d/up/README.md") == b"# demo\n"


def test_missing_file(sandbox):
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("nope.txt")
