"""The agent CLIs' directory, made under `make run`'s umask (077), is opened to sandboxes for
group and others alike (a fresh machine once got a 0705 parent and every build failed with
bwrap's "Can't find source path …: Permission denied")."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from snapshots import agent_installs


def test_the_cli_directory_and_its_parent_are_traversable_by_group_and_others(settings, tmp_path):
    root = tmp_path / "opt" / "inspect-web" / "agent-clis"
    old = os.umask(0o077)
    try:
        root.mkdir(parents=True)
        settings.AGENT_CLIS_DIR = root
        agent_installs.link_pinned("claude-code")
    finally:
        os.umask(old)
    for path in (root, root.parent, root / "bin"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o055 == 0o055, (path, oct(mode))


def test_a_failed_or_killed_install_leaves_the_directory_open_and_no_scratch(
    settings, tmp_path, monkeypatch
):
    """An install that fails (or was killed half-way by an earlier process) must not leave the
    mounted directory 0700 or its scratch behind: every sandbox start would fail in bwrap."""
    root = tmp_path / "agent-clis"
    settings.AGENT_CLIS_DIR = root
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid no process has any more
    old = os.umask(0o077)
    try:
        abandoned = root / "claude-code" / f".1.0.0.{dead.pid}.partial"
        abandoned.mkdir(parents=True)
        os.chmod(root, 0o700)
        os.chmod(root / "claude-code", 0o700)

        def npm_fails(argv, **kwargs):
            return subprocess.CompletedProcess(argv, 1, "", "npm error 404 Not Found")

        monkeypatch.setattr(agent_installs.subprocess, "run", npm_fails)
        with pytest.raises(agent_installs.InstallError, match="404 Not Found"):
            agent_installs.install("claude-code", "1.0.1")
    finally:
        os.umask(old)
    for path in (root, root / "claude-code"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o055 == 0o055, (path, oct(mode))
    assert list((root / "claude-code").iterdir()) == []
