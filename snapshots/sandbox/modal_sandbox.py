"""A live Modal sandbox (:class:`ModalSandbox`), and the commands it runs: how an exec and a PTY
are started, killed and resized with small ``sh`` wrappers (Modal has no call for either), and
their handles (:class:`ModalExec`, :class:`ModalPty`). The backend (``modal_backend.py``) makes
and finds sandboxes; every Modal call goes through the adapter (``modal_sdk.py``).
"""

from __future__ import annotations

import collections
import contextlib
import math
import posixpath
import queue
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from snapshots.sandbox.base import (
    WORKSPACE,
    Command,
    ExecHandle,
    ExecResult,
    FileInfo,
    Limits,
    OutputLine,
    PathEscapesWorkspace,
    Pty,
    Sandbox,
    SandboxError,
    SandboxGone,
    SnapshotRef,
    StreamName,
    workspace_relpath,
)
from snapshots.sandbox.modal_sdk import (
    ModalCallError,
    ModalNotFound,
    ModalSandboxFinished,
    ModalSDK,
)

BACKEND_NAME = "modal"

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


def exec_timeout_seconds(limits: Limits, timeout: float | None) -> int | None:
    """The whole-second timeout Modal's exec takes (it truncates to int; never round to 0)."""
    effective = limits.exec_timeout(timeout)
    if effective is None:
        return None
    return max(1, math.ceil(effective))


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
# Sandbox
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
