"""Per-sandbox resource limits with cgroup v1 (memory, pids, cpu, freezer).

Each sandbox gets ``<our cgroup>/inspect-sandboxes/<id>`` in every controller, nested under the
cgroup of the process that creates it so the host's own accounting still covers sandboxes.
Where cgroups cannot be used, the caller falls back to per-process rlimits (weaker: memory is
then limited per process, not per sandbox, and limit hits are not attributed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from snapshots.sandbox.base import Limits

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu", "freezer")
GROUP = "inspect-sandboxes"


def _own_cgroup(controller: str) -> str:
    """Our cgroup path in ``controller`` per /proc/self/cgroup ('/' if not listed)."""
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(","):
                return path
    return "/"


def unavailable_reason() -> str | None:
    """None when cgroup v1 limits can be used here, else why not."""
    if os.geteuid() != 0:
        return "not root: cannot create cgroups"
    for ctl in ("memory", "pids", "cpu"):
        if not (CGROUP_ROOT / ctl / "cgroup.procs").exists():
            return f"cgroup v1 controller {ctl!r} is not mounted at {CGROUP_ROOT / ctl}"
    return None


class Cgroups:
    """The cgroup directories of one sandbox."""

    def __init__(self, paths: dict[str, str]) -> None:
        self.paths = {k: Path(v) for k, v in paths.items()}

    @classmethod
    def create(cls, sandbox_id: str, limits: Limits) -> Cgroups:
        paths: dict[str, str] = {}
        for ctl in CONTROLLERS:
            base = CGROUP_ROOT / ctl
            if not (base / "cgroup.procs").exists():
                continue
            path = base / _own_cgroup(ctl).lstrip("/") / GROUP / sandbox_id
            path.mkdir(parents=True, exist_ok=True)
            paths[ctl] = str(path)
        cg = cls(paths)
        cg.apply(limits)
        return cg

    @classmethod
    def existing(cls, sandbox_id: str) -> Cgroups:
        """The cgroups a (possibly half-created) sandbox of this process would have."""
        paths = {}
        for ctl in CONTROLLERS:
            path = CGROUP_ROOT / ctl / _own_cgroup(ctl).lstrip("/") / GROUP / sandbox_id
            if path.is_dir():
                paths[ctl] = str(path)
        return cls(paths)

    def _write(self, ctl: str, name: str, value: str | int) -> None:
        if ctl in self.paths:
            (self.paths[ctl] / name).write_text(str(value))

    def _read(self, ctl: str, name: str) -> str:
        try:
            return (self.paths[ctl] / name).read_text()
        except (KeyError, OSError):
            return ""

    def apply(self, limits: Limits) -> None:
        if limits.memory_mb is not None:
            limit = int(limits.memory_mb) * 1024 * 1024
            self._write("memory", "memory.limit_in_bytes", limit)
            # With swap accounting, memsw must be capped too or the hog just swaps.
            with contextlib.suppress(OSError):
                self._write("memory", "memory.memsw.limit_in_bytes", limit)
        if limits.pids is not None:
            self._write("pids", "pids.max", int(limits.pids))
        if limits.cpus is not None:
            period = 100_000
            self._write("cpu", "cpu.cfs_period_us", period)
            self._write("cpu", "cpu.cfs_quota_us", max(1000, int(limits.cpus * period)))

    def add(self, pid: int) -> None:
        for path in self.paths.values():
            (path / "cgroup.procs").write_text(str(pid))

    def counters(self) -> tuple[int, int]:
        """(OOM kills so far, fork attempts refused by pids.max so far)."""
        oom = 0
        for line in self._read("memory", "memory.oom_control").splitlines():
            if line.startswith("oom_kill "):
                oom = int(line.split()[1])
        forks = 0
        for line in self._read("pids", "pids.events").splitlines():
            if line.startswith("max "):
                forks = int(line.split()[1])
        return oom, forks

    def procs(self) -> list[int]:
        text = self._read("pids", "cgroup.procs") or self._read("memory", "cgroup.procs")
        return [int(x) for x in text.split()]

    def freeze(self) -> bool:
        """Pause every process (for a consistent snapshot). False if freezer is unavailable."""
        if "freezer" not in self.paths:
            return False
        self._write("freezer", "freezer.state", "FROZEN")
        deadline = time.monotonic() + 2.0
        while self._read("freezer", "freezer.state").strip() != "FROZEN":
            if time.monotonic() > deadline:
                return True  # best effort: still consistent enough, and never hang a snapshot
            time.sleep(0.002)
        return True

    def thaw(self) -> None:
        with contextlib.suppress(OSError):
            self._write("freezer", "freezer.state", "THAWED")

    def kill_all(self, timeout: float = 3.0) -> None:
        """SIGKILL everything left in the group (thawing first: frozen tasks can't die)."""
        self.thaw()
        deadline = time.monotonic() + timeout
        while True:
            pids = self.procs()
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def destroy(self) -> None:
        self.kill_all()
        for path in self.paths.values():
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # tasks still exiting
