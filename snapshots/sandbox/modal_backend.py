"""The Modal sandbox backend: each sandbox is a ``modal.Sandbox`` restored from a snapshot image.

Selected when ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` are set (see :func:`modal_configured`).
Stdlib and ``modal`` only; ``modal`` itself is imported lazily, by :class:`ModalSDK`.

Layers
------
* :class:`ModalSDK` is the only code that touches the ``modal`` package. Each method is one SDK
  call (or a fixed chain of them), passes the backend's keyword arguments through unchanged, adds
  the per-process client, and turns Modal's exceptions into :class:`ModalCallError` s or the
  stdlib's ``FileNotFoundError`` family. Tests hand it a stand-in for the ``modal`` package.
* :class:`ModalBackend` / :class:`ModalSandbox` implement the protocol of ``base.py`` on top of it.

How protocol features map to Modal (SDK 1.6)
--------------------------------------------
* snapshot ref = the object id (``im-...``) of the image ``Sandbox.snapshot_filesystem(ttl=None)``
  returns; restore = ``Image.from_id``; delete = ``modal.experimental.image_delete``.
* egress: ``none`` = ``block_network=True``; ``allowlist`` = ``outbound_domain_allowlist``;
  ``open`` = neither (see :func:`egress_arguments`).
* exec = ``Sandbox.exec(text=True, bufsize=1)`` with stdout and stderr read by two threads. Modal
  has no call to kill an exec, so every command runs under a small ``sh`` wrapper that starts it in
  a new session and writes the session id to a file; ``kill()`` signals that process group.
* A timed-out exec makes ``wait()`` return -1 (Modal raises nothing): reported as ``timed_out``.
* Files: ``Sandbox.filesystem.read_bytes/write_bytes/list_files`` on a path first resolved with
  ``realpath -m`` inside the sandbox, so symlinks cannot lead the file API out of /workspace.
* PTY: ``Sandbox.exec(pty=True)``. Modal has no resize call; ``resize`` runs ``stty`` on the pty.
* Not enforceable on Modal: ``Limits.pids``. ``lifetime_seconds`` is capped at Modal's 24 h.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import math
import os
import posixpath
import queue
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from snapshots.sandbox.base import (
    AGENT_TOOLS_MOUNT,
    WORKSPACE,
    BackendUnavailable,
    Command,
    ExecHandle,
    ExecResult,
    FileInfo,
    Limits,
    NetworkPolicy,
    OutputLine,
    PathEscapesWorkspace,
    Pty,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxGone,
    SnapshotNotFound,
    SnapshotRef,
    StreamName,
    workspace_relpath,
)

BACKEND_NAME = "modal"
DEFAULT_APP_NAME = "inspect-web"
# Modal refuses sandbox timeouts above 24 hours and requires one (None is for persistent ones).
MODAL_MAX_LIFETIME_S = 24 * 3600
# The image's PATH: the platform's agent CLIs first (AGENT_TOOLS_MOUNT/bin), then Debian's.
MODAL_PATH = f"{AGENT_TOOLS_MOUNT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TAG_MANAGED = "inspect-web"
TAG_ID = "inspect-web-id"
TAG_WALL_SECONDS = "inspect-web-wall-seconds"
UNCONFIGURED_REASON = "MODAL_TOKEN_ID not set"

# Id formats the SDK itself checks (``_Object`` type prefixes): sandboxes "sb-", images "im-".
_MODAL_SANDBOX_ID = re.compile(r"^sb-[A-Za-z0-9]+$")
_MODAL_IMAGE_ID = re.compile(r"^im-[A-Za-z0-9]+$")
_PROTOCOL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# Control files (pid and tty of running commands) live outside the workspace so snapshots and
# diffs never see them.
CONTROL_DIR = "/tmp/.inspect-web"
EXEC_WRAPPER_NAME = "inspect-exec"
PTY_WRAPPER_NAME = "inspect-pty"
CONTROL_NAME = "inspect-ctl"

# argv: sh -c EXEC_WRAPPER inspect-exec PIDFILE CMD...
# Runs CMD in a new session (so its whole process group can be killed), records the session id,
# and removes the record when CMD ends so a later kill() cannot hit a reused pid. The inner shell
# stays CMD's parent, so a CMD killed by signal N still exits 128+N.
EXEC_WRAPPER = (
    'f=$1; shift; mkdir -p "${f%/*}" 2>/dev/null; '
    "if setsid -w true 2>/dev/null; then "
    'exec setsid -w /bin/sh -c \'echo $$ >"$0"; "$@"; s=$?; rm -f "$0"; exit $s\' "$f" "$@"; '
    "fi; "
    'echo $$ >"$f"; "$@"; s=$?; rm -f "$f"; exit $s'
)
# argv: sh -c PTY_WRAPPER inspect-pty PIDFILE TTYFILE COLS ROWS CMD...
PTY_WRAPPER = (
    'mkdir -p "${1%/*}" 2>/dev/null; echo $$ >"$1"; tty >"$2" 2>/dev/null; '
    'stty cols "$3" rows "$4" 2>/dev/null; shift 4; exec "$@"'
)
# argv: sh -c KILL_GROUP inspect-ctl PIDFILE SIGNAL...
KILL_GROUP = (
    'p=$(cat "$1" 2>/dev/null) || exit 0; f=$1; shift; '
    'for s in "$@"; do kill -s "$s" -- "-$p" 2>/dev/null || kill -s "$s" "$p" 2>/dev/null; done; '
    'rm -f "$f"'
)
# argv: sh -c RESIZE_PTY inspect-ctl TTYFILE COLS ROWS
RESIZE_PTY = 'stty -F "$(cat "$1")" cols "$2" rows "$3"'

# After a command exits, its streams stay open while a background child (``sleep 100 &``) holds
# them; stop reading once they have been quiet this long.
STREAM_GRACE_S = 2.0
CONTROL_TIMEOUT_S = 60
SIGKILL_EXIT = 128 + 9


def modal_unconfigured_reason(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the Modal backend cannot be used with ``environ`` (default ``os.environ``), or None."""
    env = os.environ if environ is None else environ
    if not env.get("MODAL_TOKEN_ID"):
        return UNCONFIGURED_REASON
    if not env.get("MODAL_TOKEN_SECRET"):
        return "MODAL_TOKEN_SECRET not set"
    return None


def modal_configured(environ: Mapping[str, str] | None = None) -> bool:
    """True when both Modal token variables are set, i.e. the Modal backend is the one to use."""
    return modal_unconfigured_reason(environ) is None


def egress_arguments(policy: NetworkPolicy) -> dict[str, Any]:
    """``Sandbox.create`` keyword arguments enforcing ``policy`` outside the sandbox.

    Modal refuses ``block_network`` together with an allowlist, so exactly one is set. The
    protocol lets ``example.com`` cover its subdomains; Modal matches names exactly unless they
    start with ``*.``, so each domain is sent both ways.
    """
    if policy.mode == "open":
        return {}
    domains: list[str] = []
    if policy.mode == "allowlist":
        for raw in policy.domains:
            dom = raw.strip().lower().rstrip(".").removeprefix("*.")
            for name in (dom, f"*.{dom}"):
                if dom and name not in domains:
                    domains.append(name)
    if not domains:
        # An empty allowlist means "nothing": say so with block_network rather than rely on how
        # Modal reads an empty list.
        return {"block_network": True}
    return {"outbound_domain_allowlist": domains}


def resource_arguments(limits: Limits) -> dict[str, Any]:
    """``Sandbox.create`` keyword arguments for the sandbox-wide limits Modal can enforce."""
    lifetime = limits.lifetime_seconds
    timeout = MODAL_MAX_LIFETIME_S if lifetime is None else math.ceil(lifetime)
    args: dict[str, Any] = {"timeout": max(1, min(timeout, MODAL_MAX_LIFETIME_S))}
    # Modal treats a bare number as a request; (request, limit) makes it a hard limit.
    if limits.cpus is not None:
        args["cpu"] = (float(limits.cpus), float(limits.cpus))
    if limits.memory_mb is not None:
        args["memory"] = (int(limits.memory_mb), int(limits.memory_mb))
    return args


def exec_timeout_seconds(limits: Limits, timeout: float | None) -> int | None:
    """The whole-second timeout Modal's exec takes (it truncates to int; never round to 0)."""
    effective = limits.exec_timeout(timeout)
    if effective is None:
        return None
    return max(1, math.ceil(effective))


# --------------------------------------------------------------------------------------------
# The adapter: the only code that touches ``modal``.
# --------------------------------------------------------------------------------------------


class ModalCallError(SandboxError):
    """A Modal SDK call failed; the message names the operation and Modal's reason."""


class ModalNotFound(ModalCallError):
    """Modal says the object (sandbox, image, app) does not exist."""


class ModalSandboxFinished(ModalCallError):
    """Modal says the sandbox has already terminated."""


@dataclass(frozen=True)
class RemoteEntry:
    """A directory entry as ``SandboxFilesystem.list_files`` reports it, without Modal types."""

    name: str
    kind: str
    size: int
    mode: int
    mtime: float


_FILE_KINDS = {"file": "file", "directory": "dir", "symlink": "symlink"}


class ModalSDK:
    """Thin adapter over the ``modal`` package (1.6.x).

    ``modal_module`` replaces the package in tests; everything else calls the real SDK. A fresh
    ``Client.from_credentials`` is made per OS process, because a client (and its gRPC channel)
    must not be shared across ``fork``, as Celery's prefork pool does.
    """

    def __init__(
        self,
        *,
        token_id: str,
        token_secret: str,
        app_name: str = DEFAULT_APP_NAME,
        base_image: str | None = None,
        agent_commands: Sequence[str] = (),
        modal_module: Any = None,
    ) -> None:
        if not token_id or not token_secret:
            raise BackendUnavailable("Modal needs both MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
        self.app_name = app_name
        self.base_image = base_image
        # Shell commands that install the platform's agent CLIs into the base image, at the
        # path local sandboxes see them (sessions/agents/installs.modal_image_commands).
        self.agent_commands = tuple(agent_commands)
        self._token_id = token_id
        self._token_secret = token_secret
        if modal_module is None:
            modal_module = importlib.import_module("modal")
            importlib.import_module("modal.experimental")  # image_delete lives here in 1.6
        self._modal = modal_module
        self._errors = modal_module.exception
        self._per_process: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    # -- errors ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def translated(self, what: str) -> Iterator[None]:
        """Turn Modal's exceptions raised while doing ``what`` into this module's / stdlib's."""
        e = self._errors
        try:
            yield
        except e.SandboxFilesystemNotFoundError as exc:
            raise FileNotFoundError(f"{what}: {exc}") from exc
        except e.SandboxFilesystemIsADirectoryError as exc:
            raise IsADirectoryError(f"{what}: {exc}") from exc
        except e.SandboxFilesystemNotADirectoryError as exc:
            raise NotADirectoryError(f"{what}: {exc}") from exc
        except e.SandboxFilesystemPermissionError as exc:
            raise PermissionError(f"{what}: {exc}") from exc
        except e.NotFoundError as exc:
            raise ModalNotFound(f"{what}: not found on Modal ({exc})") from exc
        except e.SandboxTerminatedError as exc:
            raise ModalSandboxFinished(f"{what}: the Modal sandbox has terminated") from exc
        except e.AuthError as exc:
            raise ModalCallError(
                f"{what}: Modal rejected the credentials ({exc}); check MODAL_TOKEN_ID and "
                "MODAL_TOKEN_SECRET"
            ) from exc
        except e.Error as exc:
            raise ModalCallError(f"{what}: {type(exc).__name__}: {exc}") from exc

    # -- client and app, one per process ---------------------------------------------------------

    def _process_state(self) -> dict[str, Any]:
        pid = os.getpid()
        with self._lock:
            state = self._per_process.get(pid)
            if state is None:
                # A dict inherited through fork holds the parent's client: drop it, never reuse.
                self._per_process = {}
                state = self._per_process[pid] = {}
            return state

    def client(self) -> Any:
        """This process's ``modal.Client`` (made on first use in each process)."""
        state = self._process_state()
        if "client" not in state:
            with self.translated("connecting to Modal"):
                state["client"] = self._modal.Client.from_credentials(
                    self._token_id, self._token_secret
                )
        return state["client"]

    def app(self) -> Any:
        """This process's handle on the Modal app every sandbox belongs to (created if missing)."""
        state = self._process_state()
        if "app" not in state:
            client = self.client()
            with self.translated(f"looking up Modal app {self.app_name!r}"):
                state["app"] = self._modal.App.lookup(
                    self.app_name, create_if_missing=True, client=client
                )
        return state["app"]

    # -- sandboxes -------------------------------------------------------------------------------

    def sandbox_create(self, **kwargs: Any) -> Any:
        """``modal.Sandbox.create(app=..., client=..., **kwargs)``."""
        app, client = self.app(), self.client()
        with self.translated("creating a Modal sandbox"):
            return self._modal.Sandbox.create(app=app, client=client, **kwargs)

    def sandbox_from_id(self, sandbox_id: str) -> Any:
        client = self.client()
        with self.translated(f"looking up Modal sandbox {sandbox_id}"):
            return self._modal.Sandbox.from_id(sandbox_id, client=client)

    def sandbox_from_name(self, name: str) -> Any:
        client = self.client()
        with self.translated(f"looking up Modal sandbox named {name!r}"):
            return self._modal.Sandbox.from_name(self.app_name, name, client=client)

    def sandbox_list(self, **kwargs: Any) -> list[Any]:
        """Running sandboxes of the app (``Sandbox.list`` skips finished ones)."""
        app, client = self.app(), self.client()
        with self.translated("listing Modal sandboxes"):
            return list(self._modal.Sandbox.list(app_id=app.app_id, client=client, **kwargs))

    def sandbox_id(self, sb: Any) -> str:
        return sb.object_id

    def sandbox_get_tags(self, sb: Any) -> dict[str, str]:
        with self.translated("reading sandbox tags"):
            return dict(sb.get_tags())

    def sandbox_poll(self, sb: Any) -> int | None:
        with self.translated("polling a Modal sandbox"):
            return sb.poll()

    def sandbox_terminate(self, sb: Any) -> None:
        with self.translated("terminating a Modal sandbox"):
            sb.terminate()

    def sandbox_exec(self, sb: Any, *args: str, **kwargs: Any) -> Any:
        with self.translated(f"starting {args[0] if args else 'a command'} in a Modal sandbox"):
            return sb.exec(*args, **kwargs)

    def sandbox_snapshot_filesystem(self, sb: Any, **kwargs: Any) -> str:
        """Snapshot the whole filesystem; returns the new image's object id."""
        with self.translated("snapshotting a Modal sandbox"):
            return sb.snapshot_filesystem(**kwargs).object_id

    # -- files -----------------------------------------------------------------------------------

    def fs_read_bytes(self, sb: Any, remote_path: str) -> bytes:
        with self.translated(f"reading {remote_path}"):
            return sb.filesystem.read_bytes(remote_path)

    def fs_write_bytes(self, sb: Any, data: bytes, remote_path: str) -> None:
        with self.translated(f"writing {remote_path}"):
            sb.filesystem.write_bytes(data, remote_path)

    def fs_list_files(self, sb: Any, remote_path: str) -> list[RemoteEntry]:
        with self.translated(f"listing {remote_path}"):
            entries = sb.filesystem.list_files(remote_path)
            return [
                RemoteEntry(
                    name=entry.name,
                    kind=_FILE_KINDS.get(getattr(entry.type, "value", entry.type), "other"),
                    size=int(entry.size),
                    # Keep permission bits only, whether Modal reports st_mode or just those.
                    mode=int(entry.mode) & 0o7777,
                    mtime=float(entry.modified_time),
                )
                for entry in entries
            ]

    # -- processes -------------------------------------------------------------------------------

    def process_read(self, proc: Any, stream: StreamName) -> Iterator[Any]:
        """Yield what the process writes to ``stream`` (lines with ``bufsize=1``; bytes if
        ``text=False``) until the stream ends."""
        with self.translated(f"reading {stream}"):
            yield from getattr(proc, stream)

    def process_wait(self, proc: Any) -> int:
        """The exit code; -1 if the exec's timeout passed (Modal raises nothing then)."""
        with self.translated("waiting for a command"):
            return proc.wait()

    def process_write(self, proc: Any, data: bytes) -> None:
        with self.translated("writing to a command's stdin"):
            proc.stdin.write(data)
            proc.stdin.drain()

    # -- images ----------------------------------------------------------------------------------

    def image_from_id(self, image_id: str) -> Any:
        """The image ``image_id``, hydrated now so a deleted one fails here, not in create."""
        client = self.client()
        with self.translated(f"loading Modal image {image_id}"):
            image = self._modal.Image.from_id(image_id, client=client)
            image.hydrate(client=client)
            return image

    def image_base(self) -> Any:
        """The image of an empty workspace: ``base_image`` (a registry tag) or debian_slim,
        with the platform's agent CLIs when ``agent_commands`` are given."""
        with self.translated("defining the base image"):
            if self.base_image:
                base = self._modal.Image.from_registry(self.base_image)
            else:
                base = self._modal.Image.debian_slim()
            if self.agent_commands:
                # Built by Modal's image builder (with its network), never in a sandbox; the
                # CLIs' bin/ comes first on PATH, as in local sandboxes.
                base = base.run_commands(*self.agent_commands).env({"PATH": MODAL_PATH})
            # WORKDIR creates /workspace, which Sandbox.create(workdir=...) needs to exist.
            return base.workdir(WORKSPACE)

    def image_from_directory(self, src_dir: str) -> str:
        """Build an image whose /workspace is a copy of ``src_dir``; returns its object id."""
        base = self.image_base()
        app = self.app()
        with self.translated(f"building a Modal image from {src_dir}"):
            image = base.add_local_dir(src_dir, WORKSPACE, copy=True)
            return image.build(app).object_id

    def image_delete(self, image_id: str) -> None:
        client = self.client()
        with self.translated(f"deleting Modal image {image_id}"):
            self._modal.experimental.image_delete(image_id, client=client)


# --------------------------------------------------------------------------------------------
# Exec handles and PTYs
# --------------------------------------------------------------------------------------------


class _StreamEnd:
    """Queue marker: one of the two streams has ended."""


_UNDECODABLE = "[inspect-web: this stream is not valid UTF-8; the rest of it was dropped]"


class ModalExec(ExecHandle):
    """A command started by :meth:`ModalSandbox.exec`."""

    def __init__(self, owner: ModalSandbox, proc: Any, *, pidfile: str) -> None:
        self._owner = owner
        self._sdk = owner.sdk
        self._proc = proc
        self._pidfile = pidfile
        self._started = time.monotonic()
        self._queue: queue.Queue[OutputLine | _StreamEnd] = queue.Queue()
        # Lines wait() drained before anyone iterated them; consumed lines are not kept, so a
        # long-running, chatty command does not grow memory.
        self._pending: collections.deque[OutputLine] = collections.deque()
        self._open_streams = 2
        self._last_line_at = self._started
        self._exit_code: int | None = None
        self._exited_at: float | None = None
        self._wait_error: SandboxError | None = None
        self._exited = threading.Event()
        self._killed = False
        self._result: ExecResult | None = None
        for stream in ("stdout", "stderr"):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()
        threading.Thread(target=self._wait_for_exit, daemon=True).start()

    def _read(self, stream: StreamName) -> None:
        try:
            for text in self._sdk.process_read(self._proc, stream):
                self._queue.put(OutputLine(stream, text[:-1] if text.endswith("\n") else text))
        except UnicodeDecodeError:
            # text=True decodes strictly; binary output ends the stream, so say so in-band.
            self._queue.put(OutputLine(stream, _UNDECODABLE))
        except Exception:  # noqa: S110 - a broken stream must not hang wait(); the exit code tells
            pass
        finally:
            self._queue.put(_StreamEnd())

    def _wait_for_exit(self) -> None:
        try:
            self._exit_code = self._sdk.process_wait(self._proc)
        except SandboxError as exc:
            self._wait_error = self._owner.explain(exc)
        finally:
            self._exited_at = time.monotonic()
            self._exited.set()

    def _next_line(self) -> OutputLine | None:
        """The next line received from either stream, or None once both are done."""
        while self._open_streams:
            if self._exited_at is not None:
                idle = time.monotonic() - max(self._last_line_at, self._exited_at)
                if idle >= STREAM_GRACE_S:
                    self._open_streams = 0  # a background child holds the pipe: stop here
                    break
                wait = STREAM_GRACE_S - idle
            else:
                wait = 0.25
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                continue
            if isinstance(item, _StreamEnd):
                self._open_streams -= 1
                continue
            self._last_line_at = time.monotonic()
            return item
        return None

    def __iter__(self) -> Iterator[OutputLine]:
        while True:
            if self._pending:
                yield self._pending.popleft()
                continue
            line = self._next_line()
            if line is None:
                return
            yield line

    def wait(self) -> ExecResult:
        if self._result is not None:
            return self._result
        self._exited.wait()
        while (line := self._next_line()) is not None:
            self._pending.append(line)
        if self._wait_error is not None:
            raise self._wait_error
        code = self._exit_code if self._exit_code is not None else -1
        timed_out = code == -1 and not self._killed
        if timed_out:
            # Modal's deadline ended our wait; make sure nothing of the command lingers.
            self._kill_group()
        if timed_out or self._killed:
            code = SIGKILL_EXIT
        self._result = ExecResult(
            exit_code=code,
            duration_s=(self._exited_at or time.monotonic()) - self._started,
            timed_out=timed_out,
            limit_hit="wall_time" if timed_out else None,
            output=tuple(self._pending),
        )
        return self._result

    def _kill_group(self) -> None:
        with contextlib.suppress(SandboxError):
            self._owner.control([KILL_GROUP, CONTROL_NAME, self._pidfile, "KILL"])

    def kill(self) -> None:
        if self._killed or self._exited.is_set():
            return
        self._killed = True
        # The wrapper may not have written its pid file yet: retry until the command is gone.
        for _ in range(5):
            self._kill_group()
            if self._exited.wait(0.5):
                return


class ModalPty(Pty):
    """A program running on a pseudo-terminal in a Modal sandbox (``exec(pty=True)``)."""

    def __init__(self, owner: ModalSandbox, proc: Any, *, pidfile: str, ttyfile: str) -> None:
        self._owner = owner
        self._sdk = owner.sdk
        self._proc = proc
        self._pidfile = pidfile
        self._ttyfile = ttyfile
        self._buffer = bytearray()
        self._eof = False
        self._exit_code: int | None = None
        self._closed = False
        self._cond = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for chunk in self._sdk.process_read(self._proc, "stdout"):
                data = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
                with self._cond:
                    self._buffer += data
                    self._cond.notify_all()
        except Exception:  # noqa: S110 - EOF is how the reader learns; exit_code() tells the rest
            pass
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()
        with contextlib.suppress(SandboxError):
            self._exit_code = self._sdk.process_wait(self._proc)

    def read(self, max_bytes: int = 65536, timeout: float | None = None) -> bytes:
        with self._cond:
            self._cond.wait_for(lambda: self._buffer or self._eof, timeout)
            data = bytes(self._buffer[:max_bytes])
            del self._buffer[:max_bytes]
            return data

    def write(self, data: bytes) -> None:
        try:
            self._sdk.process_write(self._proc, data)
        except ModalCallError as exc:
            raise self._owner.explain(exc) from exc

    def resize(self, cols: int, rows: int) -> None:
        # Setting the size on the pty makes the kernel send SIGWINCH to the program.
        self._owner.control([RESIZE_PTY, CONTROL_NAME, self._ttyfile, str(cols), str(rows)])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(SandboxError):
            self._owner.control([KILL_GROUP, CONTROL_NAME, self._pidfile, "HUP", "KILL"])

    def exit_code(self) -> int | None:
        return self._exit_code


# --------------------------------------------------------------------------------------------
# Sandbox and backend
# --------------------------------------------------------------------------------------------


class ModalSandbox(Sandbox):
    """A live Modal sandbox. ``id`` is the caller's id (the Modal name) or Modal's ``sb-...``."""

    backend_name = BACKEND_NAME

    def __init__(
        self,
        sdk: ModalSDK,
        handle: Any,
        sandbox_id: str,
        *,
        wall_seconds: float | None,
        snapshot_timeout: int,
    ) -> None:
        self.sdk = sdk
        self.handle = handle
        self.id = sandbox_id
        self._limits = Limits(wall_seconds=wall_seconds)
        self._snapshot_timeout = snapshot_timeout

    # -- errors ----------------------------------------------------------------------------------

    def explain(self, exc: SandboxError) -> SandboxError:
        """``exc`` as SandboxGone if the sandbox has finished, else unchanged."""
        if isinstance(exc, SandboxGone) or not isinstance(exc, ModalCallError):
            return exc
        if isinstance(exc, ModalSandboxFinished | ModalNotFound):
            return SandboxGone(self.id, str(exc))
        try:
            finished = self.sdk.sandbox_poll(self.handle) is not None
        except ModalNotFound:
            finished = True
        except ModalCallError:
            finished = False
        return SandboxGone(self.id, str(exc)) if finished else exc

    @contextlib.contextmanager
    def _calling_modal(self) -> Iterator[None]:
        try:
            yield
        except ModalCallError as exc:
            raise self.explain(exc) from exc

    def control(self, argv: Sequence[str]) -> str:
        """Run one of our own short shell snippets (``sh -c argv[0] argv[1:]``); return stdout."""
        with self._calling_modal():
            proc = self.sdk.sandbox_exec(
                self.handle, "/bin/sh", "-c", *argv, timeout=CONTROL_TIMEOUT_S, workdir="/"
            )
            out = "".join(self.sdk.process_read(proc, "stdout"))
            err = "".join(self.sdk.process_read(proc, "stderr"))
            code = self.sdk.process_wait(proc)
        if code != 0:
            raise SandboxError(
                f"sandbox {self.id}: internal command failed ({code}): {err.strip()}"
            )
        return out

    # -- commands --------------------------------------------------------------------------------

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return WORKSPACE
        if cwd.startswith("/"):
            return posixpath.normpath(cwd)
        rel = workspace_relpath(cwd)
        return posixpath.join(WORKSPACE, rel) if rel else WORKSPACE

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
        # Modal runs each exec in its own process tree; the local backend's containment
        # (reaper, Landlock domain) has no equivalent here, so secrets are plain env.
        env = {**(env or {}), **(secrets or {})}
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty command")
        pidfile = f"{CONTROL_DIR}/exec-{uuid.uuid4().hex}.pid"
        seconds = exec_timeout_seconds(self._limits, timeout)
        with self._calling_modal():
            proc = self.sdk.sandbox_exec(
                self.handle,
                "/bin/sh",
                "-c",
                EXEC_WRAPPER,
                EXEC_WRAPPER_NAME,
                pidfile,
                *argv,
                text=True,
                bufsize=1,
                timeout=seconds,
                workdir=self._cwd(cwd),
                env=dict(env) if env else None,
            )
        return ModalExec(self, proc, pidfile=pidfile)

    def open_pty(
        self,
        argv: Sequence[str] = ("/bin/bash", "-i"),
        *,
        cols: int = 80,
        rows: int = 24,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Pty:
        if not argv:
            raise ValueError("empty command")
        token = uuid.uuid4().hex
        pidfile = f"{CONTROL_DIR}/pty-{token}.pid"
        ttyfile = f"{CONTROL_DIR}/pty-{token}.tty"
        with self._calling_modal():
            proc = self.sdk.sandbox_exec(
                self.handle,
                "/bin/sh",
                "-c",
                PTY_WRAPPER,
                PTY_WRAPPER_NAME,
                pidfile,
                ttyfile,
                str(cols),
                str(rows),
                *argv,
                pty=True,
                text=False,
                workdir=self._cwd(cwd),
                # Modal's PTY takes TERM from the worker's environment, which has none.
                env={"TERM": "xterm-256color", **(env or {})},
            )
        return ModalPty(self, proc, pidfile=pidfile, ttyfile=ttyfile)

    # -- files -----------------------------------------------------------------------------------

    def resolve(self, path: str) -> tuple[str, str]:
        """``path`` with its symlinks resolved inside the sandbox, as ``(relative to
        /workspace, absolute)``.

        Raises PathEscapesWorkspace if ``path`` or any symlink on it leads out of /workspace.
        There is a window between this check and the file call in which a process in the
        sandbox could swap in a symlink; that only reaches the sandbox's own files, never the
        worker's, so the confinement is about protocol semantics, not host safety.
        """
        rel = workspace_relpath(path)
        target = posixpath.join(WORKSPACE, rel) if rel else WORKSPACE
        out = self.control(['realpath -m -- "$1" "$2"', CONTROL_NAME, WORKSPACE, target])
        lines = out.splitlines()
        if len(lines) != 2:
            raise SandboxError(f"sandbox {self.id}: cannot resolve {path!r}: {out!r}")
        root, resolved = lines
        if resolved == root:
            return "", resolved
        if not resolved.startswith(root.rstrip("/") + "/"):
            raise PathEscapesWorkspace(path, f"a symlink leads to {resolved}")
        return resolved[len(root.rstrip("/")) + 1 :], resolved

    def read_file(self, path: str) -> bytes:
        _, resolved = self.resolve(path)
        with self._calling_modal():
            return self.sdk.fs_read_bytes(self.handle, resolved)

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        rel, resolved = self.resolve(path)
        if not rel:
            raise IsADirectoryError(f"{path!r} is the workspace directory itself")
        with self._calling_modal():
            self.sdk.fs_write_bytes(self.handle, bytes(data), resolved)
        # write_bytes has no mode argument, and keeps an existing file's mode.
        self.control(['chmod "$1" "$2"', CONTROL_NAME, format(mode & 0o7777, "o"), resolved])

    def list_files(self, path: str = "") -> list[FileInfo]:
        rel, resolved = self.resolve(path)
        with self._calling_modal():
            entries = self.sdk.fs_list_files(self.handle, resolved)
        return sorted(
            (
                FileInfo(
                    path=posixpath.join(rel, e.name) if rel else e.name,
                    name=e.name,
                    kind=e.kind,  # type: ignore[arg-type]
                    size=e.size,
                    mtime=e.mtime,
                    mode=e.mode,
                )
                for e in entries
            ),
            key=lambda info: info.name,
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def snapshot(self) -> SnapshotRef:
        with self._calling_modal():
            # ttl=None: without it Modal deletes the image after 30 days.
            image_id = self.sdk.sandbox_snapshot_filesystem(
                self.handle, timeout=self._snapshot_timeout, ttl=None
            )
        return SnapshotRef(backend=BACKEND_NAME, ref=image_id)

    def terminate(self) -> None:
        with contextlib.suppress(ModalCallError):
            self.sdk.sandbox_terminate(self.handle)

    def is_alive(self) -> bool:
        try:
            return self.sdk.sandbox_poll(self.handle) is None
        except ModalNotFound:
            return False


class ModalBackend(SandboxBackend):
    """Sandboxes on Modal. Pass credentials explicitly (see :meth:`from_env` for the env)."""

    name = BACKEND_NAME

    def __init__(
        self,
        *,
        token_id: str = "",
        token_secret: str = "",
        app_name: str = DEFAULT_APP_NAME,
        base_image: str | None = None,
        agent_commands: Sequence[str] = (),
        idle_timeout: int | None = None,
        snapshot_timeout: int = 300,
        sdk: ModalSDK | None = None,
    ) -> None:
        self.sdk = sdk or ModalSDK(
            token_id=token_id,
            token_secret=token_secret,
            app_name=app_name,
            base_image=base_image,
            agent_commands=agent_commands,
        )
        self.idle_timeout = idle_timeout
        self.snapshot_timeout = snapshot_timeout

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> ModalBackend:
        """The backend for ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``; BackendUnavailable if
        they are not set."""
        env = os.environ if environ is None else environ
        reason = modal_unconfigured_reason(env)
        if reason:
            raise BackendUnavailable(f"Modal backend not configured: {reason}")
        return cls(
            token_id=env["MODAL_TOKEN_ID"], token_secret=env["MODAL_TOKEN_SECRET"], **options
        )

    def _sandbox(self, handle: Any, sandbox_id: str, wall_seconds: float | None) -> ModalSandbox:
        return ModalSandbox(
            self.sdk,
            handle,
            sandbox_id,
            wall_seconds=wall_seconds,
            snapshot_timeout=self.snapshot_timeout,
        )

    def _snapshot_image(self, ref: SnapshotRef) -> Any:
        if ref.backend != BACKEND_NAME:
            raise SnapshotNotFound(f"snapshot {ref} was made by the {ref.backend!r} backend")
        if not _MODAL_IMAGE_ID.match(ref.ref):
            raise SnapshotNotFound(f"snapshot {ref} is not a Modal image id")
        try:
            return self.sdk.image_from_id(ref.ref)
        except ModalNotFound as exc:
            raise SnapshotNotFound(f"snapshot {ref} no longer exists on Modal") from exc

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
        limits = limits or Limits()
        network = network or NetworkPolicy()
        if sandbox_id is not None and (
            not _PROTOCOL_ID.match(sandbox_id)
            or _MODAL_SANDBOX_ID.match(sandbox_id)
            or sandbox_id.startswith("ap-")
        ):
            raise ValueError(
                f"sandbox id {sandbox_id!r} must match [A-Za-z0-9_-]{{1,64}} and not look like a "
                "Modal id (sb-..., ap-...)"
            )
        image = self._snapshot_image(snapshot) if snapshot else self.sdk.image_base()
        tags = {
            **(labels or {}),
            TAG_MANAGED: "1",
            TAG_WALL_SECONDS: "none" if limits.wall_seconds is None else str(limits.wall_seconds),
        }
        kwargs: dict[str, Any] = {
            "image": image,
            "workdir": WORKSPACE,
            "tags": tags,
            **resource_arguments(limits),
            **egress_arguments(network),
        }
        # No secrets: sandboxes hold no standing credentials; env is exactly what was passed.
        if env:
            kwargs["env"] = dict(env)
        if sandbox_id is not None:
            kwargs["name"] = sandbox_id
            tags[TAG_ID] = sandbox_id
        if self.idle_timeout is not None:
            kwargs["idle_timeout"] = self.idle_timeout
        handle = self.sdk.sandbox_create(**kwargs)
        return self._sandbox(handle, sandbox_id or self.sdk.sandbox_id(handle), limits.wall_seconds)

    def attach(self, sandbox_id: str) -> Sandbox:
        try:
            if _MODAL_SANDBOX_ID.match(sandbox_id):
                handle = self.sdk.sandbox_from_id(sandbox_id)
            else:
                handle = self.sdk.sandbox_from_name(sandbox_id)
            if self.sdk.sandbox_poll(handle) is not None:
                raise SandboxGone(sandbox_id, "it has finished")
        except ModalNotFound as exc:
            raise SandboxGone(sandbox_id, "Modal does not know it (or it has finished)") from exc
        except ModalSandboxFinished as exc:
            raise SandboxGone(sandbox_id, str(exc)) from exc
        wall: float | None = Limits().wall_seconds
        with contextlib.suppress(ModalCallError, ValueError):
            raw = self.sdk.sandbox_get_tags(handle).get(TAG_WALL_SECONDS)
            if raw is not None:
                wall = None if raw == "none" else float(raw)
        return self._sandbox(handle, sandbox_id, wall)

    def snapshot_from_directory(
        self, src_dir: str, *, labels: Mapping[str, str] | None = None
    ) -> SnapshotRef:
        # Modal images carry no labels; the caller keeps them with the ref.
        if not os.path.isdir(src_dir):
            raise FileNotFoundError(f"snapshot source {src_dir!r} is not a directory")
        return SnapshotRef(backend=BACKEND_NAME, ref=self.sdk.image_from_directory(src_dir))

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        if ref.backend != BACKEND_NAME:
            raise SnapshotNotFound(f"snapshot {ref} was made by the {ref.backend!r} backend")
        if not _MODAL_IMAGE_ID.match(ref.ref):
            raise SnapshotNotFound(f"snapshot {ref} is not a Modal image id")
        with contextlib.suppress(ModalNotFound):  # already deleted: deleting is idempotent
            self.sdk.image_delete(ref.ref)

    def list_sandboxes(self) -> list[str]:
        ids = []
        for handle in self.sdk.sandbox_list(tags={TAG_MANAGED: "1"}):
            try:
                tags = self.sdk.sandbox_get_tags(handle)
            except ModalCallError:
                tags = {}
            ids.append(tags.get(TAG_ID) or self.sdk.sandbox_id(handle))
        return sorted(ids)

    def doctor(self) -> list[str]:
        lines = [
            f"modal: app {self.sdk.app_name!r}; snapshots are filesystem images kept until deleted",
            "modal: egress none/allowlist/open enforced by Modal (block_network, "
            "outbound_domain_allowlist)",
            "modal: Limits.pids is not enforced (Modal has no process limit); lifetime is capped "
            f"at {MODAL_MAX_LIFETIME_S // 3600} h",
            "modal: sandbox images need /bin/sh, setsid -w, realpath -m and stty (Debian has them)",
            "modal: agent CLIs in the image at "
            f"{AGENT_TOOLS_MOUNT} ({len(self.sdk.agent_commands)} build steps)"
            if self.sdk.agent_commands
            else "modal: the image carries no agent CLIs (the CLI runtimes will not start)",
        ]
        try:
            self.sdk.app()
            lines.append("modal: credentials accepted, app reachable")
        except SandboxError as exc:
            lines.append(f"modal: NOT usable: {exc}")
        return lines


__all__ = [
    "BACKEND_NAME",
    "DEFAULT_APP_NAME",
    "MODAL_MAX_LIFETIME_S",
    "UNCONFIGURED_REASON",
    "ModalBackend",
    "ModalCallError",
    "ModalExec",
    "ModalNotFound",
    "ModalPty",
    "ModalSDK",
    "ModalSandbox",
    "ModalSandboxFinished",
    "RemoteEntry",
    "egress_arguments",
    "exec_timeout_seconds",
    "modal_configured",
    "modal_unconfigured_reason",
    "resource_arguments",
]
