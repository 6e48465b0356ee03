"""The agent CLIs' directory, made under `make run`'s umask (077), is opened to sandboxes for
group and others alike (a fresh machine once got a 0705 parent and every build failed with
bwrap's "Can't find source path …: Permission denied")."""

from __future__ import annotations

import os
import stat

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
