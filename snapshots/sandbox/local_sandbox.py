"""A running local sandbox as the host sees it: every exec, PTY and file operation is a request
to its command server (``sandbox_init/``) over the unix socket ``ctl.sock``.

Which runtime started the sandbox (``bwrap.py``, ``runsc.py``) matters here only where gVisor
behaves differently; the backend that made it (``local.LocalBackend``) is reached through
``Owner`` for what only it knows: whether the sandbox still runs, snapshotting and destroying it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from snapshots.sandbox import host_mounts, protocol, quota
from snapshots.sandbox.base import (
    WORKSPACE,
    Command,
    ExecHandle,
    ExecResult,
    FileInfo,
    LimitExceeded,
    LimitName,
    Limits,
    OutputLine,
    PathEscapesWorkspace,
    Pty,
    Sandbox,
    SandboxError,
    SandboxGone,
    SnapshotRef,
    workspace_relpath,
)
from snapshots.sandbox.cgroups import Cgroups


class Owner(Protocol):
    """What a sandbox asks of the backend that made it (``local.LocalBackend``)."""

    name: str
    sandboxes_dir: Path

    def alive(self, state: dict[str, Any]) -> bool: ...

    def snapshot_sandbox(self, sandbox: LocalSandbox) -> SnapshotRef: ...

    def destroy(self, sandbox_id: str) -> None: ...


# --------------------------------------------------------------------------------------------
# Exec handles and PTYs
# --------------------------------------------------------------------------------------------


class _LineSplitter:
    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.buf = b""

    def feed(self, data: bytes) -> list[OutputLine]:
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [OutputLine(self.stream, ln.decode("utf-8", "replace")) for ln in lines]  # type: ignore[arg-type]

    def flush(self) -> list[OutputLine]:
        if not self.buf:
            return []
        line, self.buf = self.buf, b""
        return [OutputLine(self.stream, line.decode("utf-8", "replace"))]  # type: ignore[arg-type]


class LocalExecHandle(ExecHandle):
    def __init__(self, sandbox: LocalSandbox, sock: socket.socket, pid: int) -> None:
        self._sandbox = sandbox
        self._sock = sock
        self.pid = pid
        self._start = time.monotonic()
        self._counters = sandbox._counters()
        self._split = {b"O": _LineSplitter("stdout"), b"E": _LineSplitter("stderr")}
        self._buffered: list[OutputLine] = []
        self._result: ExecResult | None = None
        self._lock = threading.Lock()

    def _step(self) -> list[OutputLine]:
        """Read one frame; returns the complete lines it produced."""
        try:
            typ, payload = protocol.recv(self._sock)
        except (protocol.ProtocolEOF, OSError):
            self._finish(None)
            return self._flush_all()
        if typ in self._split:
            return self._split[typ].feed(payload)
        if typ == b"X":
            self._finish(json.loads(payload))
            return self._flush_all()
        return []

    def _flush_all(self) -> list[OutputLine]:
        return self._split[b"O"].flush() + self._split[b"E"].flush()

    def _finish(self, info: dict[str, Any] | None) -> None:
        self._sock.close()
        duration = time.monotonic() - self._start
        oom0, forks0 = self._counters
        oom1, forks1 = self._sandbox._counters()
        if info is None:
            if oom1 > oom0:
                # The OOM killer took the sandbox's init too: the sandbox is gone for good.
                self._result = ExecResult(137, duration, limit_hit="memory")
                return
            self._result = ExecResult(-1, duration)
            self._gone = True
            return
        code, timed_out = info["exit_code"], info["timed_out"]
        limit: LimitName | None = None
        if timed_out:
            limit = "wall_time"
        elif oom1 > oom0 and code != 0:
            limit = "memory"
        elif forks1 > forks0 and code != 0:
            limit = "pids"
        elif code != 0 and self._sandbox._disk_full():
            limit = "disk"
        self._result = ExecResult(code, duration, timed_out=timed_out, limit_hit=limit)

    _gone = False

    def __iter__(self) -> Iterator[OutputLine]:
        while self._buffered:
            yield self._buffered.pop(0)
        while self._result is None:
            with self._lock:
                lines = self._step() if self._result is None else []
            yield from lines
        self._raise_if_gone()

    def _raise_if_gone(self) -> None:
        if self._gone:
            raise SandboxGone(self._sandbox.id, "it died while the command was running")

    def wait(self) -> ExecResult:
        with self._lock:
            while self._result is None:
                self._buffered.extend(self._step())
        self._raise_if_gone()
        assert self._result is not None
        if self._buffered:
            out, self._buffered = tuple(self._buffered), []
            r = self._result
            return ExecResult(r.exit_code, r.duration_s, r.timed_out, r.limit_hit, out)
        return self._result

    def kill(self) -> None:
        if self._result is None:
            with contextlib.suppress(OSError):
                protocol.send(self._sock, b"K")


class LocalPty(Pty):
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._exit: int | None = None
        self._closed = False

    def read(self, max_bytes: int = 65536, timeout: float | None = None) -> bytes:
        if self._closed or self._exit is not None:
            return b""
        self._sock.settimeout(timeout)
        try:
            typ, payload = protocol.recv(self._sock)
        except TimeoutError:
            return b""  # nothing yet; EOF is signalled by exit_code() becoming non-None
        except (protocol.ProtocolEOF, OSError):
            self._exit = -1 if self._exit is None else self._exit
            return b""
        finally:
            if not self._closed:
                self._sock.settimeout(None)
        if typ == b"X":
            self._exit = json.loads(payload)["exit_code"]
            return b""
        return payload if typ == b"P" else b""

    def write(self, data: bytes) -> None:
        protocol.send(self._sock, b"I", data)

    def resize(self, cols: int, rows: int) -> None:
        protocol.send_json(self._sock, {"cols": int(cols), "rows": int(rows)}, typ=b"R")

    def exit_code(self) -> int | None:
        return self._exit

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            protocol.send(self._sock, b"K")
        self._sock.close()


# --------------------------------------------------------------------------------------------
# Sandbox
# --------------------------------------------------------------------------------------------


class LocalSandbox(Sandbox):
    def __init__(self, backend: Owner, sandbox_id: str, state: dict[str, Any]) -> None:
        self.id = sandbox_id
        self.backend_name = backend.name
        self._backend = backend
        self.state = state
        self.dir = backend.sandboxes_dir / sandbox_id
        self._cg = Cgroups(state.get("cgroups") or {})

    # -- plumbing -------------------------------------------------------------------------

    def _counters(self) -> tuple[int, int]:
        return self._cg.counters()

    def _disk_full(self) -> bool:
        disk = host_mounts.disk_stat_path(self.state)
        return disk is not None and quota.is_full(disk, self.state["limits"]["disk_bytes"])

    def _connect(self) -> socket.socket:
        path, dirfd = protocol.unix_path(Path(self.state.get("ctl") or self.dir / "ctl.sock"))
        try:
            return protocol.connect(path, timeout=None)
        except (FileNotFoundError, ConnectionRefusedError):
            raise SandboxGone(self.id, "its command server is not running") from None
        finally:
            if dirfd is not None:
                os.close(dirfd)

    def _request(self, req: dict[str, Any], data: bytes | None = None) -> tuple[Any, socket.socket]:
        sock = self._connect()
        try:
            protocol.send_json(sock, req)
            if data is not None:
                protocol.send(sock, b"D", data)
            reply = protocol.recv_json(sock)
        except (protocol.ProtocolEOF, OSError):
            sock.close()
            raise SandboxGone(self.id, "the connection to it broke") from None
        if not reply.get("ok"):
            sock.close()
            self._raise_reply(req, reply)
        return reply, sock

    def _raise_reply(self, req: dict[str, Any], reply: dict[str, Any]) -> None:
        err, msg = reply.get("error"), reply.get("message", "")
        path = req.get("path", "")
        if err == "spawn":
            if reply.get("errno") == "EAGAIN":
                raise LimitExceeded(
                    "pids",
                    "the sandbox has no process slots left; wait for "
                    "background processes to exit or raise Limits.pids",
                )
            if reply.get("errno") == "ENOENT":
                raise SandboxError(
                    f"cannot start command: working directory {req.get('cwd')} "
                    "does not exist in the sandbox"
                )
            raise SandboxError(f"cannot start command: {msg}")
        if err == "escape":
            raise PathEscapesWorkspace(path, msg)
        if err in ("ECONNREFUSED", "ETIMEDOUT"):
            raise ConnectionRefusedError(
                f"nothing answers on port {req.get('port')} inside sandbox {self.id}"
            )
        if err == "notfound":
            raise FileNotFoundError(f"{path}: no such file or directory in the sandbox")
        if err == "EISDIR":
            raise IsADirectoryError(f"{path} is a directory")
        if err == "ENOTDIR":
            raise NotADirectoryError(f"{path}: not a directory")
        if err == "EACCES":
            raise PermissionError(f"{path}: permission denied in the sandbox")
        if err in ("ENOSPC", "EDQUOT"):
            raise LimitExceeded(
                "disk",
                f"writing {path} filled the sandbox's disk quota; delete files or raise "
                "Limits.disk_bytes (INSPECT_SANDBOX_DISK_BYTES)",
            )
        raise SandboxError(f"sandbox {self.id}: {req.get('op')} failed: {msg or err}")

    # -- commands -------------------------------------------------------------------------

    def _argv(self, command: Command) -> list[str]:
        if isinstance(command, str):
            return ["/bin/sh", "-c", command]
        argv = [str(a) for a in command]
        if not argv:
            raise ValueError("empty command")
        return argv

    def _cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return WORKSPACE
        if cwd.startswith("/") and not (cwd == WORKSPACE or cwd.startswith(WORKSPACE + "/")):
            return cwd  # e.g. /tmp: allowed, the sandbox can go there anyway
        rel = workspace_relpath(cwd)
        return f"{WORKSPACE}/{rel}" if rel else WORKSPACE

    def exec(
        self,
        command: Command,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        secrets: Mapping[str, str] | None = None,
        service: bool = False,
    ) -> LocalExecHandle:
        limits = Limits(**self.state["limits"])
        if service and secrets and self.state.get("runtime") == "runsc":
            # This gVisor build shows /proc/<pid>/environ to every process (mode 0444): a
            # long-running holder of secrets would hand them to every later command.
            raise SandboxError(
                "a start service with secrets cannot run under gVisor (runsc): its "
                "/proc/<pid>/environ is readable by every process there. Use the bwrap "
                "runtime (INSPECT_SANDBOX_RUNTIME), or start the service without secrets"
            )
        req = {
            "op": "exec",
            "argv": self._argv(command),
            "env": {**(env or {}), **(secrets or {})},
            # Run by a reaper of its own, unreadable by other commands, its tree ended on return.
            "contain": bool(secrets) or service,
            "service": service,
            "cwd": self._cwd(cwd),
            "timeout": limits.exec_timeout(timeout),
        }
        reply, sock = self._request(req)
        return LocalExecHandle(self, sock, reply["pid"])

    def open_pty(
        self,
        argv: Sequence[str] = ("/bin/bash", "-i"),
        *,
        cols: int = 80,
        rows: int = 24,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> LocalPty:
        req = {
            "op": "exec",
            "argv": self._argv(argv),
            "env": dict(env or {}),
            "cwd": self._cwd(cwd),
            "timeout": None,
            "pty": {"cols": int(cols), "rows": int(rows)},
        }
        _, sock = self._request(req)
        return LocalPty(sock)

    def connect_port(self, port: int, *, timeout: float = 10.0) -> socket.socket:
        """Through the command server, which connects from inside the sandbox's network
        namespace (so it works under bubblewrap and gVisor alike, whatever the egress mode)."""
        port = int(port)
        if not 0 < port < 65536:
            raise ValueError(f"not a TCP port: {port}")
        _, sock = self._request({"op": "connect", "port": port, "timeout": timeout})
        return sock

    # -- files ----------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        rel = workspace_relpath(path)
        _, sock = self._request({"op": "read", "path": rel})
        try:
            typ, data = protocol.recv(sock)
        except (protocol.ProtocolEOF, OSError):
            raise SandboxGone(self.id, "the connection to it broke") from None
        finally:
            sock.close()
        return data

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        rel = workspace_relpath(path)
        if not rel:
            raise IsADirectoryError("cannot write to the workspace root")
        _, sock = self._request({"op": "write", "path": rel, "mode": mode}, data=bytes(data))
        sock.close()

    def list_files(self, path: str = "") -> list[FileInfo]:
        rel = workspace_relpath(path)
        reply, sock = self._request({"op": "list", "path": rel})
        sock.close()
        return [FileInfo(**e) for e in reply["entries"]]

    def egress_refusals(self, after: int = 0) -> list[dict[str, Any]]:
        """The allowlist proxy's ``refused {json}`` lines (egress.log); NAT refusals of
        ``open`` sandboxes happen in the host's nftables table and are not listed."""
        try:
            text = (self.dir / "egress.log").read_text(errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            if line.startswith("refused "):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line.removeprefix("refused ")))
        return out[after:]

    # -- lifecycle ------------------------------------------------------------------------

    def is_alive(self) -> bool:
        return self._backend.alive(self.state)

    def snapshot(self) -> SnapshotRef:
        if not self.is_alive():
            raise SandboxGone(self.id)
        return self._backend.snapshot_sandbox(self)

    def terminate(self) -> None:
        self._backend.destroy(self.id)

    def __repr__(self) -> str:
        return f"<LocalSandbox {self.id} runtime={self.state.get('runtime')}>"
