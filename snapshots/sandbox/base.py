"""The sandbox backend protocol every backend (local, modal, ...) implements.

Stdlib only: workers, tests and management commands import this without Django.

Vocabulary
----------
* A **snapshot** is an immutable filesystem tree of a prepared repository workspace, named by a
  :class:`SnapshotRef`.  A backend restores it copy-on-write into a new sandbox.
* A **sandbox** is a live, isolated environment that outlives a single command: processes
  started by one ``exec`` (daemons, ``sleep 100 &``) are still there for the next one, and a
  new worker process can :meth:`SandboxBackend.attach` to it by id.
* Inside every sandbox the workspace is at :data:`WORKSPACE` (``/workspace``).  File-API paths
  are relative to it; an absolute path is accepted only if it lies under ``/workspace``.

Ordering guarantee of streamed output: lines of one stream arrive in the order they were
written.  Across stdout and stderr the order is the order in which the backend *received* them;
no backend can recover the order of two writes to different pipes made within microseconds of
each other, so callers must not depend on cross-stream order finer than that.
"""

from __future__ import annotations

import posixpath
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

WORKSPACE = "/workspace"
# The platform's agent CLIs, read-only in every sandbox; SANDBOX_PATH puts their bin/ first.
AGENT_TOOLS_MOUNT = "/opt/inspect/agents"
SANDBOX_PATH = f"{AGENT_TOOLS_MOUNT}/bin:/usr/bin:/bin"
# Inside every local sandbox, http://127.0.0.1:GATEWAY_PORT is the model gateway, carried out
# through the sandbox's own door (so egress `none` still reaches it).
GATEWAY_PORT = 4181

StreamName = Literal["stdout", "stderr"]
NetworkMode = Literal["none", "allowlist", "open"]
LimitName = Literal["wall_time", "memory", "pids", "disk"]


# --------------------------------------------------------------------------------------------
# Errors. Messages are meant to be shown to users as they are.
# --------------------------------------------------------------------------------------------


class SandboxError(Exception):
    """Base class of every error a backend raises on purpose."""


class PathEscapesWorkspace(SandboxError):
    """A file-API path points outside /workspace (``..``, absolute path, or symlink)."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        msg = f"path {path!r} is outside the sandbox workspace {WORKSPACE}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class SandboxGone(SandboxError):
    """The sandbox no longer exists (terminated, crashed, machine rebooted)."""

    def __init__(self, sandbox_id: str, detail: str = "") -> None:
        self.sandbox_id = sandbox_id
        msg = f"sandbox {sandbox_id} is gone"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class LimitExceeded(SandboxError):
    """A resource limit stopped an operation (raised by helpers that cannot return a result)."""

    def __init__(self, limit: LimitName, detail: str = "") -> None:
        self.limit = limit
        msg = f"sandbox limit exceeded: {limit}"
        super().__init__(f"{msg} ({detail})" if detail else msg)


class SnapshotNotFound(SandboxError):
    """The snapshot does not exist (deleted, or made by another backend / machine)."""


class BackendUnavailable(SandboxError):
    """The backend cannot run on this machine; the message says why."""


# --------------------------------------------------------------------------------------------
# Value objects
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotRef:
    """Names a snapshot. ``ref`` is opaque to everyone but the backend that made it."""

    backend: str
    ref: str

    def __str__(self) -> str:
        return f"{self.backend}:{self.ref}"

    @classmethod
    def parse(cls, text: str) -> SnapshotRef:
        """Inverse of ``str()``, for storing refs in a database column."""
        backend, sep, ref = text.partition(":")
        if not sep or not backend or not ref:
            raise ValueError(f"not a snapshot ref: {text!r}")
        return cls(backend=backend, ref=ref)


@dataclass(frozen=True)
class NetworkPolicy:
    """Egress policy of a sandbox, enforced by the backend outside the sandbox.

    ``none``: only the sandbox's own loopback. ``open``: unrestricted. ``allowlist``: HTTP(S)
    to the named domains only (a domain also allows its subdomains; ``*.example.com`` is
    accepted as a synonym of ``example.com``).
    """

    mode: NetworkMode = "none"
    domains: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in ("none", "allowlist", "open"):
            raise ValueError(f"unknown network mode {self.mode!r}")
        # Accept lists from TOML/JSON but keep the object hashable.
        object.__setattr__(self, "domains", tuple(self.domains))
        if self.mode != "allowlist" and self.domains:
            raise ValueError("domains are only meaningful with mode='allowlist'")

    def allows(self, host: str) -> bool:
        """True if egress to ``host`` is permitted (used by proxies enforcing allowlists)."""
        if self.mode == "open":
            return True
        if self.mode == "none":
            return False
        host = host.lower().rstrip(".")
        for dom in self.domains:
            dom = dom.lower().rstrip(".").removeprefix("*.")
            if host == dom or host.endswith("." + dom):
                return True
        return False


@dataclass(frozen=True)
class Limits:
    """Resource limits of a sandbox. ``None`` means "no limit".

    * ``wall_seconds``: the longest any single ``exec`` may run; an exec's own ``timeout`` can
      only shorten it. The command's process group is killed and ``timed_out`` reported.
    * ``memory_mb``: memory of the whole sandbox (all its processes together).
    * ``pids``: number of processes/threads in the whole sandbox.
    * ``cpus``: CPU bandwidth in cores (``0.5`` = half a core).
    * ``lifetime_seconds``: the sandbox terminates itself after this long, even unattended.
    * ``disk_bytes``: what the sandbox may write, all places together (workspace changes,
      ``/tmp``, ``/var/tmp``); a write past it fails with ENOSPC and the command reports
      ``limit_hit='disk'``. ``None`` takes the backend's default (the platform's local backend:
      ``INSPECT_SANDBOX_DISK_BYTES``); ``0`` turns the quota off. Modal applies its own disk
      limits and ignores it.
    """

    wall_seconds: float | None = 3600.0
    memory_mb: int | None = 4096
    pids: int | None = 1024
    cpus: float | None = None
    lifetime_seconds: float | None = 24 * 3600.0
    disk_bytes: int | None = None

    def exec_timeout(self, timeout: float | None) -> float | None:
        """The effective timeout of one exec given its own requested ``timeout``."""
        if timeout is None:
            return self.wall_seconds
        if self.wall_seconds is None:
            return timeout
        return min(timeout, self.wall_seconds)


@dataclass(frozen=True)
class OutputLine:
    """One line of output; ``text`` has no trailing newline (a final partial line is kept)."""

    stream: StreamName
    text: str


@dataclass(frozen=True)
class ExecResult:
    """How a command ended.

    ``exit_code`` follows the shell convention: a process killed by signal N reports 128+N.
    ``limit_hit`` names the limit that killed or starved it ('wall_time', 'memory', 'pids',
    'disk').
    ``output`` is filled by :meth:`Sandbox.run` (and by ``ExecHandle.wait`` if the handle
    buffered lines nobody iterated).
    """

    exit_code: int
    duration_s: float
    timed_out: bool = False
    limit_hit: LimitName | None = None
    output: tuple[OutputLine, ...] = ()

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.limit_hit is None

    @property
    def stdout(self) -> str:
        return "".join(line.text + "\n" for line in self.output if line.stream == "stdout")

    @property
    def stderr(self) -> str:
        return "".join(line.text + "\n" for line in self.output if line.stream == "stderr")


@dataclass(frozen=True)
class FileInfo:
    """An entry of :meth:`Sandbox.list_files`; ``path`` is relative to the workspace."""

    path: str
    name: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime: float
    mode: int = 0

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"


# --------------------------------------------------------------------------------------------
# Path confinement shared by all backends.
# --------------------------------------------------------------------------------------------


def workspace_relpath(path: str) -> str:
    """Normalise a file-API path to a path relative to /workspace, or raise.

    Lexical checks only (``..`` and absolute paths); backends must additionally refuse to
    follow symlinks that lead outside the workspace, which needs the filesystem.
    Returns ``""`` for the workspace root.
    """
    if not isinstance(path, str) or "\x00" in path:
        raise PathEscapesWorkspace(str(path), "not a valid path")
    if path.startswith("/"):
        norm = posixpath.normpath(path)
        if norm == WORKSPACE:
            return ""
        if not norm.startswith(WORKSPACE + "/"):
            raise PathEscapesWorkspace(path, "absolute path outside the workspace")
        path = norm[len(WORKSPACE) + 1 :]
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            # Refuse any '..' that climbs above the workspace root; inner ones are harmless but
            # we normalise them away so backends never see '..' at all.
            if not parts:
                raise PathEscapesWorkspace(path, "'..' leaves the workspace")
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


# --------------------------------------------------------------------------------------------
# Live objects
# --------------------------------------------------------------------------------------------


class ExecHandle(ABC):
    """A running command. Iterate it for :class:`OutputLine` s; ``wait()`` for the result.

    Iterating is optional: ``wait()`` drains output the caller did not consume and keeps it in
    ``ExecResult.output``. Iterating after ``wait()`` yields the buffered lines.
    """

    @abstractmethod
    def __iter__(self) -> Iterator[OutputLine]: ...

    @abstractmethod
    def wait(self) -> ExecResult:
        """Block until the command ends (or its timeout kills it) and return how it ended."""

    @abstractmethod
    def kill(self) -> None:
        """Kill the command and every process in its process group. Idempotent."""

    def __enter__(self) -> ExecHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


class Pty(ABC):
    """An interactive pseudo-terminal running a program inside the sandbox."""

    @abstractmethod
    def read(self, max_bytes: int = 65536, timeout: float | None = None) -> bytes:
        """Return available output (blocking up to ``timeout``); ``b""`` means EOF."""

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def resize(self, cols: int, rows: int) -> None: ...

    @abstractmethod
    def close(self) -> None:
        """Hang up the terminal and kill its program. Idempotent."""

    @abstractmethod
    def exit_code(self) -> int | None:
        """The program's exit code, or None while it runs."""

    def read_until(self, needle: bytes, timeout: float = 10.0) -> bytes:
        """Read until ``needle`` appears or ``timeout`` passes; returns everything read."""
        buf = b""
        deadline = time.monotonic() + timeout
        while needle not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            chunk = self.read(timeout=left)
            if not chunk:
                break
            buf += chunk
        return buf

    def __enter__(self) -> Pty:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Command = str | Sequence[str]
"""A shell command line (run by ``/bin/sh -c``) or an argv list (run directly)."""


class Sandbox(ABC):
    """A live sandbox. Every method may raise :class:`SandboxGone`."""

    id: str
    backend_name: str

    @abstractmethod
    def exec(
        self,
        command: Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        secrets: Mapping[str, str] | None = None,
        service: bool = False,
    ) -> ExecHandle:
        """Start ``command`` and return at once. ``cwd`` is workspace-relative (or absolute
        inside the sandbox); ``env`` is added to the sandbox's environment.

        ``secrets`` are added to this command's environment only, and make it *contained*:
        no other command can read its environment or memory, and when it returns everything
        it started is ended with it. ``service=True`` (a recipe ``start`` service that
        declared secrets) keeps what it started running, still unreadable by other commands.
        """

    def run(
        self,
        command: Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        secrets: Mapping[str, str] | None = None,
        service: bool = False,
    ) -> ExecResult:
        """Run ``command`` to completion and return its result with the collected output."""
        handle = self.exec(
            command, env=env, cwd=cwd, timeout=timeout, secrets=secrets, service=service
        )
        lines = list(handle)
        result = handle.wait()
        if result.output:
            return result
        return ExecResult(
            exit_code=result.exit_code,
            duration_s=result.duration_s,
            timed_out=result.timed_out,
            limit_hit=result.limit_hit,
            output=tuple(lines),
        )

    @abstractmethod
    def open_pty(
        self,
        argv: Sequence[str] = ("/bin/bash", "-i"),
        *,
        cols: int = 80,
        rows: int = 24,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Pty: ...

    def connect_port(self, port: int, *, timeout: float = 10.0) -> socket.socket:
        """A byte stream to TCP ``port`` on the sandbox's own loopback (127.0.0.1), e.g. the
        live preview of the application running inside. Raises ConnectionRefusedError when
        nothing listens there, SandboxError when this backend cannot reach into its sandboxes.
        """
        raise SandboxError(
            f"the {self.backend_name} backend cannot connect to ports inside its sandboxes"
        )

    @abstractmethod
    def read_file(self, path: str) -> bytes: ...

    @abstractmethod
    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Create or replace a file (parent directories are created)."""

    @abstractmethod
    def list_files(self, path: str = "") -> list[FileInfo]:
        """The entries of a directory (not recursive), sorted by name."""

    def egress_refusals(self, after: int = 0) -> list[dict[str, Any]]:
        """What the backend's egress enforcement refused to this sandbox, oldest first, from
        the ``after``-th refusal on: dicts with ``host``, ``port``, ``address``, ``reason``.
        Backends that cannot tell (e.g. Modal) report none."""
        return []

    @abstractmethod
    def snapshot(self) -> SnapshotRef:
        """Freeze the current workspace; ``create`` from the result restores exactly it
        (including deletions). Processes keep running. The ref outlives the sandbox."""

    @abstractmethod
    def terminate(self) -> None:
        """Kill every process and release all resources. Idempotent; never raises Gone."""

    @abstractmethod
    def is_alive(self) -> bool: ...

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()


class SandboxBackend(ABC):
    """Creates sandboxes and manages snapshots."""

    name: str

    @abstractmethod
    def create(
        self,
        *,
        snapshot: SnapshotRef | None,
        sandbox_id: str | None = None,
        network: NetworkPolicy | None = None,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Start a sandbox whose /workspace is a copy-on-write restore of ``snapshot``
        (an empty workspace if None). ``sandbox_id`` defaults to a fresh random id; ids are
        ``[A-Za-z0-9_-]{1,64}``. ``env`` becomes the environment of every exec."""

    @abstractmethod
    def attach(self, sandbox_id: str) -> Sandbox:
        """Reattach to a live sandbox (e.g. after a worker restart); raise SandboxGone."""

    @abstractmethod
    def snapshot_from_directory(
        self, src_dir: str, *, labels: Mapping[str, str] | None = None
    ) -> SnapshotRef:
        """Build a snapshot whose workspace is a copy of the host directory ``src_dir``."""

    @abstractmethod
    def delete_snapshot(self, ref: SnapshotRef) -> None:
        """Delete a snapshot. Idempotent. Backends may keep data still used by live
        sandboxes or by snapshots layered on top of it until those go away."""

    # A layered backend's store (overlay.LayerStore); None: the backend keeps whole images.
    store: Any = None

    def snapshot_layers(self, ref: SnapshotRef) -> list[str]:
        """The layers a restore of ``ref`` stacks, bottom first. A backend that keeps no layers
        of its own has one: the snapshot itself."""
        if self.store is None:
            return [ref.ref]
        return list(self.store.read_snapshot(ref.ref)["layers"])

    def layer_bytes(self, layer: str) -> int:
        """Bytes one layer holds (-1: unknown to this backend)."""
        return -1 if self.store is None else self.store.layer_bytes(layer)

    def flatten_snapshot(self, ref: SnapshotRef) -> SnapshotRef:
        """A snapshot of the same tree in one layer (``ref`` itself when it has one)."""
        if self.store is None:
            return ref
        return SnapshotRef(self.name, self.store.flatten_snapshot(ref.ref))

    @abstractmethod
    def list_sandboxes(self) -> list[str]:
        """Ids of sandboxes this backend believes are alive (for reaping after crashes)."""

    @abstractmethod
    def doctor(self) -> list[str]:
        """Human-readable lines describing what works here and what does not, and why."""


def signal_exit_code(returncode: int) -> int:
    """Map Python's negative 'killed by signal N' returncode to the shell's 128+N."""
    return 128 - returncode if returncode < 0 else returncode


__all__ = [
    "WORKSPACE",
    "BackendUnavailable",
    "Command",
    "ExecHandle",
    "ExecResult",
    "FileInfo",
    "LimitExceeded",
    "Limits",
    "NetworkPolicy",
    "OutputLine",
    "PathEscapesWorkspace",
    "Pty",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxGone",
    "SnapshotNotFound",
    "SnapshotRef",
    "signal_exit_code",
    "workspace_relpath",
]
