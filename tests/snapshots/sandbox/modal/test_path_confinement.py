"""The file API stays inside /workspace: '..', outside absolute paths and symlinks are refused."""

from __future__ import annotations

import pytest

from snapshots.sandbox import PathEscapesWorkspace


def fs_calls(fake_modal):
    return [c for c in fake_modal.calls if c.target.startswith("SandboxFilesystem.")]


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "a/../../x", "/workspace/../etc"])
def test_lexical_escapes_are_refused_without_touching_the_sandbox(fake_modal, sandbox, path):
    before = len(fake_modal.calls)

    with pytest.raises(PathEscapesWorkspace):
        sandbox.read_file(path)
    with pytest.raises(PathEscapesWorkspace):
        sandbox.write_file(path, b"x")
    with pytest.raises(PathEscapesWorkspace):
        sandbox.list_files(path)
    assert len(fake_modal.calls) == before


def test_a_symlink_out_of_the_workspace_is_refused(fake_modal, sandbox):
    fs = fake_modal.only_sandbox().fs
    fs.files["/etc/passwd"] = b"root:x:0:0"
    fs.symlinks["/workspace/etc"] = "/etc"
    fs.symlinks["/workspace/sneaky.txt"] = "../etc/passwd"

    for attempt in (
        lambda: sandbox.read_file("etc/passwd"),
        lambda: sandbox.read_file("sneaky.txt"),
        lambda: sandbox.write_file("etc/cron.d/job", b"* * * * * evil"),
        lambda: sandbox.list_files("etc"),
    ):
        with pytest.raises(PathEscapesWorkspace, match="symlink"):
            attempt()
    assert fs_calls(fake_modal) == []
    assert "/etc/cron.d/job" not in fs.files


def test_symlinks_are_resolved_inside_the_sandbox_and_followed_within_it(fake_modal, sandbox):
    fs = fake_modal.only_sandbox().fs
    fs.files["/workspace/src/a.txt"] = b"A"
    fs.dirs.add("/workspace/src")
    fs.symlinks["/workspace/alias"] = "src"

    assert sandbox.read_file("alias/a.txt") == b"A"
    assert fake_modal.recorder.last("SandboxFilesystem.read_bytes").args == (
        "/workspace/src/a.txt",
    )
    realpath = fake_modal.only_sandbox().controls[-1]
    assert realpath == ("realpath", ("/workspace", "/workspace/alias/a.txt"))


def test_written_files_read_back_with_parents_created_and_mode_set(fake_modal, sandbox):
    sandbox.write_file("/workspace/bin/run.sh", b"#!/bin/sh\n", mode=0o755)

    assert sandbox.read_file("bin/run.sh") == b"#!/bin/sh\n"
    assert fake_modal.recorder.last("SandboxFilesystem.write_bytes").args == (
        b"#!/bin/sh\n",
        "/workspace/bin/run.sh",
    )
    assert fake_modal.only_sandbox().fs.modes["/workspace/bin/run.sh"] == 0o755


def test_listing_gives_workspace_relative_entries_sorted_by_name(sandbox):
    sandbox.write_file("pkg/z.py", b"zz")
    sandbox.write_file("pkg/a.py", b"a")
    sandbox.write_file("pkg/sub/deep.py", b"")

    entries = sandbox.list_files("pkg")

    assert [(e.path, e.name, e.kind, e.size) for e in entries] == [
        ("pkg/a.py", "a.py", "file", 1),
        ("pkg/sub", "sub", "dir", 0),
        ("pkg/z.py", "z.py", "file", 2),
    ]
    assert entries[0].mode == 0o644  # permission bits only
    assert [e.name for e in sandbox.list_files("")] == ["pkg"]


def test_missing_files_and_directories_raise_the_usual_os_errors(sandbox):
    sandbox.write_file("dir/file.txt", b"x")

    with pytest.raises(FileNotFoundError):
        sandbox.read_file("nope.txt")
    with pytest.raises(IsADirectoryError):
        sandbox.read_file("dir")
    with pytest.raises(NotADirectoryError):
        sandbox.list_files("dir/file.txt")
    with pytest.raises(IsADirectoryError):
        sandbox.write_file("", b"x")


def test_listing_through_a_symlink_names_the_entries_where_they_really_are(sandbox, fake_modal):
    sandbox.write_file("src/main.py", b"")
    fake_modal.only_sandbox().fs.symlinks["/workspace/alias"] = "src"

    assert [e.path for e in sandbox.list_files("alias")] == ["src/main.py"]
