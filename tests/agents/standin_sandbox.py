"""Real sandboxes (the local backend, the platform's pinned agent CLIs on PATH) whose allowlist
egress reaches the stand-in model (tests/standin_model/) through the sandbox's proxy: what the
tests of the real CLIs run in.

Each `StandinSandboxes` uses a NAT group of its own: the host nftables table of a group holds
one operator configuration (the last backend to load it wins), so test processes running at the
same time, each with its own stand-in port, would otherwise refuse each other's stand-in."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.standin_model import SandboxRoute, StandinModel

STANDIN_KEY = "sk-standin-claude-0123456789abcdef"


class StandinSandboxes:
    def __init__(self, root: Path, tools_dir: Path, standin: StandinModel) -> None:
        from snapshots.sandbox.local import LocalBackend

        self.root = root
        self.standin = standin
        self.route: SandboxRoute = standin.sandbox_route()
        self.nat_gid = 120_000 + standin.port % 10_000
        self.backend = LocalBackend(
            root / "sandboxes",
            egress_hosts=self.route.egress_hosts,
            egress_exceptions=self.route.egress_exceptions,
            tools_dir=tools_dir,
            nat_gid=self.nat_gid,
        )
        self._boxes: list = []
        self._trees = 0

    def create(self, files: Mapping[str, str]):
        """A sandbox whose workspace holds `files` (with a .git directory, as a clone has)."""
        self._trees += 1
        src = self.root / f"tree{self._trees}"
        (src / ".git").mkdir(parents=True)
        for name, text in files.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        return self.restore(self.backend.snapshot_from_directory(str(src)))

    def restore(self, ref):
        """A sandbox from a snapshot (as the next turn of a session starts from the last)."""
        from snapshots.sandbox.base import Limits, NetworkPolicy

        box = self.backend.create(
            snapshot=ref,
            network=NetworkPolicy("allowlist", (self.route.name,)),
            limits=Limits(wall_seconds=900, memory_mb=2048, pids=256),
        )
        self._boxes.append(box)
        return box

    def close(self) -> None:
        for box in self._boxes:
            with contextlib.suppress(Exception):
                box.terminate()
        with contextlib.suppress(Exception):
            self.backend.reap()
        if shutil.which("nft"):
            subprocess.run(
                ["nft", "delete", "table", "inet", f"inspect_egress_{self.nat_gid}"],
                capture_output=True,
                check=False,
            )


@contextlib.contextmanager
def standin_sandboxes(root: Path, tools_dir: Path) -> Iterator[StandinSandboxes]:
    from tests.security.test_sandbox_network import _skip_reason

    if reason := _skip_reason("bwrap"):
        pytest.skip(reason)
    with StandinModel(key=STANDIN_KEY) as standin:
        made = StandinSandboxes(root, tools_dir, standin)
        try:
            yield made
        finally:
            made.close()
