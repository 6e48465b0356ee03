"""The local sandbox backend: overlayfs snapshots + bubblewrap (or gVisor) isolation.

How a sandbox works
-------------------
``create()`` mounts the snapshot's layers copy-on-write (``overlay.py``), makes the sandbox's
cgroups (``cgroups.py``), and starts ONE long-lived process inside fresh namespaces: the
command server ``sandbox_init.py``. It holds the namespaces (mounts, /tmp, pid namespace,
netns) alive, so background processes outlive the command that started them. Every ``exec``,
PTY and file operation is a request over the unix socket ``sandboxes/<id>/ctl.sock``; because
the socket and ``state.json`` are all a client needs, a restarted worker simply ``attach()`` es.

Two unprivileged host uids: the init is uid 0 of the sandbox's own user namespace, mapped to
``init_uid``, with a few capabilities there only (``INIT_CAPS``); every command runs as
``sandbox_uid`` with none, under the seccomp filter of ``seccomp.py``. So even a namespace escape
lands as a nobody, and no command can signal, trace or read the init, whose socket is not in the
sandbox. The host never follows sandbox-made symlinks (file operations are executed by the
init, inside the sandbox, one component at a time without following symlinks).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from snapshots.sandbox import netns, protocol, quota, seccomp
from snapshots.sandbox.base import (
    AGENT_TOOLS_MOUNT,
    WORKSPACE,
    BackendUnavailable,
    Command,
    ExecHandle,
    ExecResult,
    FileInfo,
    LimitExceeded,
    LimitName,
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
    workspace_relpath,
)
from snapshots.sandbox.cgroups import Cgroups
from snapshots.sandbox.cgroups import unavailable_reason as cgroups_unavailable
from snapshots.sandbox.egress import EGRESS_PORT, start_egress_proxy
from snapshots.sandbox.overlay import (
    LayerStore,
    bind_mount,
    copy_tree,
    is_mounted,
    probe_overlay,
    umount,
)

log = logging.getLogger(__name__)

INIT_SOURCE = (Path(__file__).with_name("sandbox_init.py")).read_bytes()
# Reads the init's source from stdin; the config line follows it (see sandbox_init.main).
INIT_BOOT = (
    "import sys;exec(compile(sys.stdin.buffer.read(int(sys.stdin.buffer.readline())),"
    "'sandbox_init.py','exec'))"
)
SANDBOX_PYTHON = "/usr/bin/python3"
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Host /etc entries a toolchain needs; nothing with secrets or host identity beyond this.
ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "mime.types",
    "protocols",
    "services",
    "terminfo",
    "bash.bashrc",
    "chromium.d",  # Debian's /usr/bin/chromium wrapper sources it (screenshots)
    "inputrc",
    "profile",
    "os-release",
    "debian_version",
    "python3",
    "python3.11",
    "magic",
)


def _proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _proc_starttime(pid: int) -> int | None:
    """Start time of a pid (clock ticks since boot); guards against pid reuse."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


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
    def __init__(self, backend: LocalBackend, sandbox_id: str, state: dict[str, Any]) -> None:
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
        disk = self.state.get("disk")
        return bool(disk) and quota.is_full(Path(disk), self.state["limits"]["disk_bytes"])

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
        return self._backend._alive(self.state)

    def snapshot(self) -> SnapshotRef:
        if not self.is_alive():
            raise SandboxGone(self.id)
        return self._backend._snapshot_sandbox(self)

    def terminate(self) -> None:
        self._backend._destroy(self.id)

    def __repr__(self) -> str:
        return f"<LocalSandbox {self.id} runtime={self.state.get('runtime')}>"


# --------------------------------------------------------------------------------------------
# Backend
# --------------------------------------------------------------------------------------------


class LocalBackend(SandboxBackend):
    """Sandboxes on this machine. Must run as root (mounts, cgroups).

    ``runtime``: ``bwrap`` (namespaces, fast) or ``runsc`` (gVisor user-space kernel: stronger
    isolation, slower start). ``sandbox_uid``: unprivileged host uid sandboxes run as.
    ``force_copy``: skip overlayfs and copy snapshots (what happens where overlay is missing).
    ``egress_hosts``: name -> address overrides for the allowlist proxy (tests, split DNS).
    ``disk_bytes``: the disk quota of a sandbox whose ``Limits.disk_bytes`` is None (0: none).
    ``egress_exceptions``/``egress_deny``: the operator's private-address exceptions and extra
    deny-list networks (``netns.py``); ``nat_gid``: the host group NAT and proxy processes run
    under, which the host nftables table confines (default ``sandbox_uid + 1``).
    ``tools_dir``: the platform's agent CLIs (sessions/agents/installs.py), mounted read-only
    at ``AGENT_TOOLS_MOUNT`` in every sandbox when it exists.
    ``init_uid``: the host uid of the sandbox's command server (uid 0 of its user namespace;
    default ``sandbox_uid + INIT_UID_OFFSET``): not the workload's, so commands cannot signal,
    trace or read it.
    """

    def __init__(
        self,
        root: Path | str,
        runtime: str = "bwrap",
        *,
        sandbox_uid: int = 100_000,
        max_layers: int = 16,
        force_copy: bool = False,
        egress_hosts: Mapping[str, str] | None = None,
        mount_base: Path | str | None = None,
        disk_bytes: int = quota.DEFAULT_DISK_BYTES,
        egress_exceptions: Sequence[netns.EgressException] = (),
        egress_deny: Sequence[netns.IPNetwork] = (),
        nat_gid: int | None = None,
        init_uid: int | None = None,
        tools_dir: Path | str | None = None,
    ) -> None:
        if runtime not in ("bwrap", "runsc"):
            raise ValueError(f"unknown runtime {runtime!r} (expected 'bwrap' or 'runsc')")
        self.runtime = runtime
        self.name = f"local-{runtime}"
        self.root = Path(root).absolute()
        self.uid = self.gid = sandbox_uid
        self.init_uid = init_uid if init_uid is not None else sandbox_uid + INIT_UID_OFFSET
        if self.init_uid == self.uid:
            raise ValueError("init_uid must differ from sandbox_uid (the workload's uid)")
        self.egress_hosts = dict(egress_hosts or {})
        self.tools_dir = Path(tools_dir).absolute() if tools_dir else None
        self.disk_bytes = disk_bytes
        self.quota_problem = quota.problem()
        self.egress_exceptions = tuple(egress_exceptions)
        self.egress_deny = netns.deny_list(egress_deny)
        self.nat_gid = sandbox_uid + 1 if nat_gid is None else nat_gid
        self._firewall_loaded = False
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = LayerStore(self.root, self.uid, self.gid, max_depth=max_layers)
        self.sandboxes_dir = self.root / "sandboxes"
        self.sandboxes_dir.mkdir(exist_ok=True)
        self.sandboxes_dir.chmod(0o755)
        # Workspaces are mounted where the unprivileged sandbox user can reach them (bwrap
        # resolves bind sources with the caller's permissions; ``root`` may sit in a 0700 dir).
        tag = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        self.mount_base = Path(mount_base or f"/run/inspect-sandboxes/{tag}")
        self.mount_base.mkdir(parents=True, exist_ok=True)
        for d in (self.mount_base.parent, self.mount_base):
            d.chmod(0o755)
        self.overlay_problem = (
            "disabled by force_copy=True" if force_copy else probe_overlay(self.store.tmp_dir)
        )
        if self.overlay_problem:
            log.warning(
                "overlayfs unavailable (%s): sandboxes will restore snapshots by copying, "
                "which costs O(tree size) per create()",
                self.overlay_problem,
            )
        self.cgroup_problem = cgroups_unavailable()
        if self.cgroup_problem:
            log.warning(
                "cgroup limits unavailable (%s): falling back to rlimits", self.cgroup_problem
            )
        self._etc = self._write_etc()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._runtime_problem = self._check_runtime()

    # -- setup helpers --------------------------------------------------------------------

    def _write_etc(self) -> Path:
        etc = self.root / "etc"
        etc.mkdir(exist_ok=True)
        etc.chmod(0o755)
        (etc / "passwd").write_text(
            f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"sandbox:x:{self.uid}:{self.gid}:sandbox:/tmp:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        )
        (etc / "group").write_text(f"root:x:0:\nsandbox:x:{self.gid}:\nnogroup:x:65534:\n")
        (etc / "hostname").write_text("sandbox\n")
        (etc / "hosts").write_text("127.0.0.1 localhost sandbox\n::1 localhost\n")
        (etc / "resolv.conf").write_text(netns.resolv_conf())
        for name in ("passwd", "group", "hostname", "hosts", "resolv.conf"):
            (etc / name).chmod(0o644)
        return etc

    def _check_runtime(self) -> str | None:
        if os.geteuid() != 0:
            return "the local backend must run as root (overlay mounts, cgroups, uid switch)"
        if not Path(SANDBOX_PYTHON).exists():
            return f"{SANDBOX_PYTHON} is missing (the in-sandbox init needs it)"
        if self.runtime == "bwrap":
            if not shutil.which("bwrap"):
                return "bubblewrap (bwrap) is not installed"
            return None
        from snapshots.sandbox import runsc

        return runsc.problem()

    def _require_runtime(self) -> None:
        if self._runtime_problem:
            raise BackendUnavailable(f"{self.name} cannot run here: {self._runtime_problem}")

    # -- snapshots ------------------------------------------------------------------------

    def _layers_of(self, ref: SnapshotRef | None) -> list[str]:
        if ref is None:
            return [self.store.empty_layer()]
        if ref.backend not in ("local-bwrap", "local-runsc", "local"):
            raise SnapshotNotFound(f"snapshot {ref} was made by another backend")
        return list(self.store.read_snapshot(ref.ref)["layers"])

    def snapshot_from_directory(
        self, src_dir: str | os.PathLike[str], *, labels: Mapping[str, str] | None = None
    ) -> SnapshotRef:
        src = Path(src_dir)
        if not src.is_dir():
            raise SandboxError(f"{src} is not a directory")
        layer = self.store.layer_from_dir(src)
        return SnapshotRef(self.name, self.store.write_snapshot([layer], labels=labels))

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        self.store.delete_snapshot(ref.ref)
        self.gc()

    def gc(self) -> list[str]:
        """Drop layers no snapshot or sandbox uses; returns removed layer ids."""
        in_use: set[str] = set()
        for sid in self._state_ids():
            with contextlib.suppress(OSError, ValueError, KeyError):
                in_use.update(self._read_state(sid).get("layers", []))
        return self.store.gc_layers(in_use)

    def _snapshot_sandbox(self, sb: LocalSandbox) -> SnapshotRef:
        st = sb.state
        if st.get("runtime") == "runsc":
            # gVisor caches file data and metadata in its sentry and writes back lazily:
            # flush before reading the upper dir from the host.
            sb.run(["/bin/sync"], timeout=60)
        frozen = sb._cg.freeze()  # a consistent point in time
        try:
            if st["mode"] == "overlay":
                new = self.store.layer_from_upper(Path(st.get("upper") or sb.dir / "upper"))
                layers = st["layers"] + ([new] if new else [])
            else:
                copy = Path(st.get("copy") or sb.dir / "copy")
                layers = [self.store.layer_from_dir(copy, chown=False)]
        finally:
            if frozen:
                sb._cg.thaw()
        snap = self.store.write_snapshot(
            layers, parent=st.get("snapshot"), labels={"sandbox": sb.id}
        )
        return SnapshotRef(self.name, snap)

    # -- sandboxes ------------------------------------------------------------------------

    def _state_ids(self) -> list[str]:
        return sorted(p.parent.name for p in self.sandboxes_dir.glob("*/state.json"))

    def _read_state(self, sandbox_id: str) -> dict[str, Any]:
        return json.loads((self.sandboxes_dir / sandbox_id / "state.json").read_text())

    def _alive(self, state: dict[str, Any]) -> bool:
        pid = state.get("init_pid")
        if not pid or _proc_starttime(pid) != state.get("init_start"):
            return False
        # A killed init lingers as a zombie until reaped; and a sandbox whose state was
        # removed by terminate() is gone whatever its processes do.
        if _proc_state(pid) in ("Z", "X", None):
            return False
        if not (self.sandboxes_dir / state["id"] / "state.json").exists():
            return False
        # The command server is the sandbox: if it died (e.g. OOM-killed) while background
        # processes keep pid 1 around, nobody can reach the sandbox any more.
        path, dirfd = protocol.unix_path(Path(state.get("ctl") or "/nonexistent"))
        try:
            protocol.connect(path, timeout=2).close()
        except OSError:
            return False
        finally:
            if dirfd is not None:
                os.close(dirfd)
        return True

    def list_sandboxes(self) -> list[str]:
        alive = []
        for sid in self._state_ids():
            with contextlib.suppress(OSError, ValueError):
                if self._alive(self._read_state(sid)):
                    alive.append(sid)
        return alive

    def reap(self) -> list[str]:
        """Clean up sandboxes whose processes died (crash, lifetime limit, reboot)."""
        dead = []
        for path in self.sandboxes_dir.iterdir():
            try:
                state = self._read_state(path.name)
            except (OSError, ValueError):
                state = {}
            if not self._alive(state):
                self._destroy(path.name)
                dead.append(path.name)
        return dead

    def attach(self, sandbox_id: str) -> LocalSandbox:
        if not ID_RE.match(sandbox_id):
            raise SandboxGone(sandbox_id, "not a valid sandbox id")
        try:
            state = self._read_state(sandbox_id)
        except (OSError, ValueError):
            raise SandboxGone(sandbox_id, "no such sandbox on this machine") from None
        if not self._alive(state):
            raise SandboxGone(sandbox_id, "its processes have exited")
        return LocalSandbox(self, sandbox_id, state)

    def create(
        self,
        *,
        snapshot: SnapshotRef | None,
        sandbox_id: str | None = None,
        network: NetworkPolicy | None = None,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> LocalSandbox:
        self._require_runtime()
        sandbox_id = sandbox_id or secrets.token_hex(8)
        if not ID_RE.match(sandbox_id):
            raise ValueError(f"invalid sandbox id {sandbox_id!r}")
        network = network or NetworkPolicy()
        limits = limits or Limits()
        if limits.disk_bytes is None:
            limits = dataclasses.replace(limits, disk_bytes=self.disk_bytes)
        if limits.disk_bytes and self.quota_problem:
            # Never a silent fallback to writing on the host's disk without a bound.
            raise BackendUnavailable(
                f"{self.name} cannot enforce the sandbox disk quota here: {self.quota_problem}; "
                "fix that, or set INSPECT_SANDBOX_DISK_BYTES=0 (Limits.disk_bytes=0) to run "
                "sandboxes without one"
            )
        layers = self._layers_of(snapshot)
        sdir = self.sandboxes_dir / sandbox_id
        try:
            sdir.mkdir()
        except FileExistsError:
            raise SandboxError(f"sandbox {sandbox_id} already exists") from None
        state: dict[str, Any] = {
            "id": sandbox_id,
            "runtime": self.runtime,
            "snapshot": snapshot.ref if snapshot else None,
            "layers": layers,
            "limits": limits.__dict__,
            "network": {"mode": network.mode, "domains": list(network.domains)},
            "labels": dict(labels or {}),
            "created": time.time(),
        }
        try:
            self._prepare_workspace(sdir, layers, state, limits)
            self._spawn(sdir, state, network, dict(env or {}), limits)
        except BaseException:
            self._destroy(sandbox_id)
            raise
        state["root"] = str(self.root)
        for final in (sdir / "state.json", self.mount_base / f"{sandbox_id}.state.json"):
            tmp = final.with_name(final.name + ".tmp")
            tmp.write_text(json.dumps(state))
            os.rename(tmp, final)
        return LocalSandbox(self, sandbox_id, state)

    def _prepare_workspace(
        self, sdir: Path, layers: list[str], state: dict[str, Any], limits: Limits
    ) -> None:
        merged = self.mount_base / state["id"]
        merged.mkdir(exist_ok=True)
        run_dir = self.mount_base / f"{state['id']}.run"
        run_dir.mkdir(exist_ok=True)
        run_dir.chmod(0o755)  # explicit: platform processes run under umask 077
        state["workspace"] = str(merged)
        # Everything the sandbox can write lives on its quota filesystem (quota.py).
        writable = sdir
        if limits.disk_bytes:
            disk = quota.SandboxDisk.create(
                sdir / "disk.img",
                self.mount_base / f"{state['id']}.disk",
                limits.disk_bytes,
                self.uid,
                self.gid,
                templates=self.root / "disk-templates",
            )
            state["disk"] = str(disk.root)
            state["private_dirs"] = {
                inside: str(disk.root / name) for name, inside in quota.PRIVATE_DIRS.items()
            }
            writable = disk.root
        if self.overlay_problem is None:
            upper, work = writable / quota.UPPER, writable / quota.WORK
            upper.mkdir(exist_ok=True)
            work.mkdir(exist_ok=True)
            # overlayfs takes the root dir's owner from upper: make the workspace ours.
            os.chown(upper, self.uid, self.gid)
            upper.chmod(0o755)
            self.store.mount(layers, upper, work, merged)
            state["mode"] = "overlay"
            state["upper"] = str(upper)
        else:
            if len(layers) > 1:
                layers[:] = [self.store.flatten(layers)]
            copy = writable / quota.COPY
            state["copy"] = str(copy)
            copy_tree(self.store.layer_path(layers[0]), copy)
            os.chown(copy, self.uid, self.gid)
            bind_mount(copy, merged)
            state["mode"] = "copy"

    def _spawn(
        self,
        sdir: Path,
        state: dict[str, Any],
        network: NetworkPolicy,
        env: dict[str, str],
        limits: Limits,
    ) -> None:
        cg = None
        # runsc makes its own cgroups from the OCI spec; bwrap sandboxes get ours.
        if self.cgroup_problem is None and self.runtime == "bwrap":
            cg = Cgroups.create(state["id"], limits)
            state["cgroups"] = {k: str(v) for k, v in cg.paths.items()}
        config: dict[str, Any] = {
            "env": env,
            "lifetime_seconds": limits.lifetime_seconds,
            "workload_uid": self.uid,
            "workload_gid": self.gid,
        }
        rl: dict[str, int] = {}
        if self.cgroup_problem is not None and limits.memory_mb:
            # Weaker fallback: per process, and limit hits are not attributed.
            rl["RLIMIT_AS"] = limits.memory_mb * 1024 * 1024
        if limits.pids and (self.cgroup_problem is not None or self.runtime == "runsc"):
            rl["RLIMIT_NPROC"] = limits.pids
        config["rlimits"] = rl
        run_dir = self.mount_base / f"{state['id']}.run"
        if network.mode != "none":
            self._require_egress_firewall(state["id"], network.mode)
        if network.mode == "allowlist":
            proxy = start_egress_proxy(
                run_dir / "egress.sock",
                network,
                self.egress_hosts,
                uid=self.uid,
                gid=self.nat_gid,
                log_path=sdir / "egress.log",
                deny=self.egress_deny,
                exceptions=self.egress_exceptions,
            )
            state["proxy_pid"], state["proxy_start"] = proxy.pid, _proc_starttime(proxy.pid)
            self._procs[state["id"] + ":proxy"] = proxy
            if cg is not None:
                cg.add(proxy.pid)  # counted against the sandbox, killed with it
            config["egress_port"] = EGRESS_PORT
            config["egress_socket"] = "/run/inspect/egress.sock"
            proxy_url = f"http://127.0.0.1:{EGRESS_PORT}"
            for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
                env.setdefault(var, proxy_url)
            env.setdefault("NO_PROXY", "localhost,127.0.0.1,::1")
            env.setdefault("no_proxy", "localhost,127.0.0.1,::1")
        if self.runtime == "bwrap":
            self._spawn_bwrap(sdir, state, network, config, cg)
        else:
            from snapshots.sandbox import runsc

            runsc.spawn(self, sdir, state, network, config, cg)

    def _require_egress_firewall(self, sandbox_id: str, mode: str) -> None:
        """Load the host deny-list table once per backend (the table of a ``nat_gid`` holds
        one configuration: the last backend to load it wins). An ``open`` sandbox that would
        reach out without it is refused, naming what is missing (never the host's network)."""
        if self._firewall_loaded:
            return
        problem = netns.nat_problem() if mode == "open" else None
        if problem is None:
            try:
                netns.install_firewall(self.nat_gid, self.egress_deny, self.egress_exceptions)
            except (OSError, RuntimeError) as exc:
                problem = str(exc)
        if problem is not None and mode == "allowlist":
            # The proxy checks every address itself; the table is its backstop.
            log.warning(
                "egress deny-list table not loaded (%s); allowlist proxies still "
                "refuse private addresses themselves",
                problem,
            )
            problem = None
        if problem is not None:
            raise SandboxError(
                f"sandbox {sandbox_id}: egress {mode!r} is unavailable on this machine: "
                f"{problem}. Install it (scripts/system-packages) or use egress 'none'."
            )
        self._firewall_loaded = True

    def _start_nat(self, sdir: Path, state: dict[str, Any], **target: Any) -> None:
        """User-mode NAT for an ``open`` sandbox; see netns.py for what it can reach."""
        try:
            nat = netns.start_nat(gid=self.nat_gid, log_path=sdir / "nat.log", **target)
        except (OSError, RuntimeError) as exc:
            raise SandboxError(f"sandbox {state['id']}: cannot set up its NAT: {exc}") from None
        self._procs[state["id"] + ":nat"] = nat
        state["nat_pid"], state["nat_start"] = nat.pid, _proc_starttime(nat.pid)

    def tools_mount(self) -> Path | None:
        """The host directory of the platform's agent CLIs, if there is one to mount."""
        return self.tools_dir if self.tools_dir is not None and self.tools_dir.is_dir() else None

    def _tools_args(self) -> list[str]:
        tools = self.tools_mount()
        if tools is None:
            return []
        # Explicit 0755 parents: the workload's uid is not the one bwrap makes them as.
        parents = ["/opt", "/opt/inspect", AGENT_TOOLS_MOUNT]
        return [*(a for p in parents for a in ("--perms", "0755", "--dir", p)),
                "--ro-bind", str(tools), AGENT_TOOLS_MOUNT]  # fmt: skip

    def bwrap_argv(
        self,
        network: NetworkPolicy,
        state: dict[str, Any],
        info_fd: int,
        block_fd: int,
        etc_fds: dict[str, int],
    ) -> list[str]:
        argv = [
            "bwrap",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
            "--symlink",
            "usr/lib",
            "/lib",
        ]
        if Path("/lib64").exists():
            argv += ["--symlink", "usr/lib64", "/lib64"]
        # Its own network namespace whatever the mode; ``open`` gets NAT attached to it.
        argv.append("--unshare-net")
        for name in ETC_FILES:
            argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        # Copied in from open fds: bwrap runs as the sandbox user, who may not be able to
        # traverse to the backend root (e.g. a 0700 pytest tmp dir).
        for name, fd in etc_fds.items():
            argv += ["--perms", "0644", "--file", str(fd), f"/etc/{name}"]
        argv += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/run",
            *_private_dir_args(state),
            "--dir",
            "/run/inspect",
            *self._tools_args(),
            "--bind",
            state["workspace"],
            WORKSPACE,
            "--chdir",
            WORKSPACE,
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "HOME",
            "/tmp",
            # The root itself is bwrap's tmpfs: make it read-only so /etc, / and friends
            # cannot be written; /tmp, /run, /var/tmp and /workspace stay writable mounts.
            "--remount-ro",
            "/",
            "--new-session",
            "--info-fd",
            str(info_fd),
            "--block-fd",
            str(block_fd),
        ]
        return argv

    def _spawn_bwrap(
        self,
        sdir: Path,
        state: dict[str, Any],
        network: NetworkPolicy,
        config: dict[str, Any],
        cg: Cgroups | None,
    ) -> None:
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path, dirfd = protocol.unix_path(sdir / "ctl.sock")
        lsock.bind(path)
        if dirfd is not None:
            os.close(dirfd)
        lsock.listen(128)
        config["listen_fd"] = lsock.fileno()
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        names = ["passwd", "group", "hostname", "hosts"]
        if network.mode == "open":
            names.append("resolv.conf")
        etc_fds = {name: os.open(self._etc / name, os.O_RDONLY) for name in names}
        argv = self.bwrap_argv(network, state, info_w, block_r, etc_fds)
        userns_r, userns_w = os.pipe()
        seccomp_fd = seccomp_program_fd()
        argv = with_workload_modes(argv) + init_privilege_argv(userns_r, seccomp_fd)
        fds = [lsock.fileno(), info_w, block_r, userns_r, seccomp_fd, *etc_fds.values()]
        if network.mode == "allowlist":
            argv += ["--bind", str(self.mount_base / f"{state['id']}.run"), "/run/inspect"]
        argv += [SANDBOX_PYTHON, "-I", "-S", "-c", INIT_BOOT]
        logf = open(sdir / "init.log", "wb")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=logf,
                stderr=logf,
                pass_fds=fds,
                # bwrap makes the user namespace as the init's uid; we then map that uid to
                # 0 inside and the workload's uid to itself (see map_sandbox_uids).
                user=self.init_uid,
                group=self.init_uid,
                extra_groups=[],
                start_new_session=True,
                # The platform's umask 077 guards the host's data dir; inside, the directories
                # bwrap makes (/var for /var/tmp, ...) must stay traversable by the workload uid.
                umask=0o022,
                # bwrap itself is pid 1 inside and its /proc/1/environ is readable there: it
                # must not inherit the worker's environment (SECRET_KEY, tokens, ...).
                env={"PATH": "/usr/bin:/bin"},
            )
        finally:
            logf.close()
            lsock.close()
            for fd in (info_w, block_r, userns_r, seccomp_fd, *etc_fds.values()):
                os.close(fd)
        self._procs[state["id"]] = proc
        assert proc.stdin is not None
        # Fits in the pipe buffer, so this does not block while bwrap waits on block_fd.
        proc.stdin.write(init_payload(config))
        proc.stdin.close()
        try:
            info = self._read_info(info_r, proc, sdir)
            child = int(info["child-pid"])
            try:
                map_sandbox_uids(child, self.init_uid, self.uid, self.gid)
                os.write(userns_w, b"1")
            except OSError:
                pass  # bwrap died: reported below, when block_fd cannot be written either
        finally:
            os.close(info_r)
            os.close(userns_w)
        if network.mode == "open":
            try:
                self._start_nat(sdir, state, pid=child)
            except SandboxError:
                # Kill before unblocking: an init started now would run without its network.
                for pid in (child, proc.pid):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                os.close(block_w)
                raise
        # Before the init starts: limits, and (best effort: needs CAP_SYS_RESOURCE) OOM
        # protection for the sandbox's own plumbing; the command shim resets oom_score_adj so
        # the OOM killer still picks the real hog.
        try:
            for pid in (proc.pid, child):
                if cg is not None:
                    cg.add(pid)
                with contextlib.suppress(OSError):
                    Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")
            os.write(block_w, b"1")
        except (ProcessLookupError, BrokenPipeError):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            err = (sdir / "init.log").read_text(errors="replace").strip()
            raise SandboxError(f"bubblewrap failed to start the sandbox: {err}") from None
        finally:
            os.close(block_w)
        state["ctl"] = str(sdir / "ctl.sock")
        state["bwrap_pid"] = proc.pid
        state["init_pid"] = child
        state["init_start"] = _proc_starttime(child)

    @staticmethod
    def _read_info(fd: int, proc: subprocess.Popen[bytes], sdir: Path) -> dict[str, Any]:
        buf = b""
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + 10
        try:
            while True:
                if not sel.select(max(0.0, deadline - time.monotonic())):
                    raise SandboxError("bubblewrap did not start within 10 s")
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
                with contextlib.suppress(ValueError):
                    return json.loads(buf)
        finally:
            sel.close()
        proc.wait(timeout=5)
        err = (sdir / "init.log").read_text(errors="replace").strip()
        raise SandboxError(f"bubblewrap failed to start the sandbox: {err or proc.returncode}")

    def _destroy(self, sandbox_id: str) -> None:
        """Kill, unmount, delete. Idempotent and tolerant of half-created sandboxes."""
        try:
            state = self._read_state(sandbox_id)
        except (OSError, ValueError):
            state = {}
        self._destroy_with_state(sandbox_id, state)

    def _destroy_with_state(self, sandbox_id: str, state: dict[str, Any]) -> None:
        sdir = self.sandboxes_dir / sandbox_id
        for key in ("init_pid", "bwrap_pid", "proxy_pid", "nat_pid", "netns_pid"):
            pid = state.get(key)
            start = state.get(key.replace("_pid", "_start")) if key != "bwrap_pid" else None
            if pid and (start is None or _proc_starttime(pid) == start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if state.get("runtime") == "runsc":
            from snapshots.sandbox import runsc

            runsc.destroy(self, sandbox_id, state)
        cg = Cgroups(state.get("cgroups") or {})
        if not state.get("cgroups"):
            # A half-created sandbox may have cgroups not yet recorded in state.json.
            cg = Cgroups.existing(sandbox_id)
        cg.destroy()
        for key in (sandbox_id, *(f"{sandbox_id}:{k}" for k in ("proxy", "nat", "netns"))):
            proc = self._procs.pop(key, None)
            if proc is not None:
                if key != sandbox_id:  # a half-created sandbox has no state.json to name it
                    with contextlib.suppress(OSError):
                        proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)
        merged = self.mount_base / sandbox_id
        if is_mounted(merged):
            umount(merged)
        with contextlib.suppress(OSError):
            merged.rmdir()
        disk = self.mount_base / f"{sandbox_id}.disk"
        if disk.exists():
            quota.SandboxDisk.release(sdir / "disk.img", disk)
        shutil.rmtree(self.mount_base / f"{sandbox_id}.run", ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (self.mount_base / f"{sandbox_id}.state.json").unlink()
        if sdir.exists():
            shutil.rmtree(sdir, ignore_errors=True)

    # -- diagnostics ----------------------------------------------------------------------

    def doctor(self) -> list[str]:
        lines = [f"backend {self.name}, data in {self.root}"]
        if self.overlay_problem:
            lines.append(
                f"restore: COPY fallback (O(tree) per create) because overlayfs "
                f"is unavailable: {self.overlay_problem}"
            )
        else:
            lines.append(
                "restore: overlayfs copy-on-write (O(1) per create), layered "
                f"snapshots up to {self.store.max_depth} deep"
            )
        if self.cgroup_problem:
            lines.append(
                f"limits: rlimit fallback (per process, no attribution): {self.cgroup_problem}"
            )
        elif self.runtime == "runsc":
            lines.append(
                "limits: memory/cpu via cgroups runsc creates (hitting memory kills the whole "
                "gVisor sandbox); pids via RLIMIT_NPROC inside gVisor (not attributed)"
            )
        else:
            lines.append("limits: cgroup v1 memory/pids/cpu/freezer per sandbox")
        if self._runtime_problem:
            lines.append(f"runtime {self.runtime}: UNAVAILABLE: {self._runtime_problem}")
        else:
            lines.append(f"runtime {self.runtime}: ok")
        from snapshots.sandbox import runsc

        if self.runtime == "bwrap":
            lines.append(f"runsc (gVisor): {runsc.problem() or 'available'} ({runsc.version()})")
        else:
            lines.append(
                f"runsc version: {runsc.version()}, platform {runsc.PLATFORM} "
                "(kvm hangs on this machine's 2022 build)"
            )
            lines += [f"runsc known issue: {issue}" for issue in runsc.known_issues()]
        if not self.disk_bytes:
            lines.append("disk quota: OFF (INSPECT_SANDBOX_DISK_BYTES=0)")
        elif self.quota_problem:
            lines.append(f"disk quota: UNAVAILABLE, sandboxes will not start: {self.quota_problem}")
        else:
            lines.append(
                f"disk quota: {self.disk_bytes} bytes per sandbox by default "
                "(a loop-mounted ext4 image holding its upper dir, /tmp and /var/tmp)"
            )
        nat = netns.nat_problem()
        lines.append(
            f"egress open: UNAVAILABLE: {nat}"
            if nat
            else f"egress open: slirp4netns NAT, deny list in nftables table "
            f"inspect_egress_{self.nat_gid} ({len(self.egress_exceptions)} operator exceptions)"
        )
        lines.append(f"sandbox uid: {self.uid} (commands), {self.init_uid} (command server)")
        abi = seccomp.landlock_abi()
        lines.append(
            f"secrets: commands given secrets run in their own Landlock domain (ABI {abi})"
            if abi and self.runtime == "bwrap"
            else "secrets: NO Landlock here: a running command's environment is readable by "
            "other commands of the sandbox while it runs (it is still ended when it returns)"
        )
        return lines


# The command server's host uid, relative to the workload's (other helpers' uids, e.g. the NAT
# helper's, sit right above sandbox_uid).
INIT_UID_OFFSET = 999
INIT_CAPS = (
    # What the command server keeps, inside its own user namespace only: starting commands
    # as the workload uid, ending them, and giving the files it writes to the workload.
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_KILL",
    "CAP_CHOWN",
    "CAP_FOWNER",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
)


def with_workload_modes(argv: list[str]) -> list[str]:
    """``argv`` with the sandbox's own directories opened to the workload: bwrap made them as
    uid 0 inside (the init), so the scratch dirs become 1777 and /etc (0700 as the parent of
    the ``--file`` copies) 0755, before the root is remounted read-only."""
    # /var too: bwrap makes it 0700 as the parent of the /var/tmp mount.
    modes = ["--chmod", "0755", "/etc", "--chmod", "0755", "/var"]
    for scratch in ("/tmp", "/var/tmp", "/run", "/dev/shm"):
        modes += ["--chmod", "1777", scratch]
    at = argv.index("--remount-ro")
    return [*argv[:at], *modes, *argv[at:]]


def init_privilege_argv(userns_block_fd: int, seccomp_fd: int) -> list[str]:
    """bwrap options that make the init uid 0 of a user namespace the host maps itself (two
    uids: the init's and the workload's), with the capabilities in INIT_CAPS, under the
    seccomp filter (bwrap's --disable-userns cannot be combined with --userns-block-fd; the
    filter refuses nested user namespaces instead)."""
    argv = ["--uid", "0", "--gid", "0", "--userns-block-fd", str(userns_block_fd)]
    for cap in INIT_CAPS:
        argv += ["--cap-add", cap]
    return [*argv, "--seccomp", str(seccomp_fd)]


def map_sandbox_uids(pid: int, init_uid: int, uid: int, gid: int) -> None:
    """Write the user namespace maps of bwrap's child ``pid``: 0 -> ``init_uid`` (the init)
    and the workload's own ids to themselves. Only root on the host can map two ids."""
    Path(f"/proc/{pid}/uid_map").write_text(f"0 {init_uid} 1\n{uid} {uid} 1\n")
    Path(f"/proc/{pid}/gid_map").write_text(f"0 {init_uid} 1\n{gid} {gid} 1\n")


def seccomp_program_fd() -> int:
    """A pipe's read end holding the seccomp program (it fits in the pipe buffer)."""
    program = seccomp.build_filter()
    r, w = os.pipe()
    try:
        os.write(w, program)
    finally:
        os.close(w)
    return r


def _private_dir_args(state: dict[str, Any]) -> list[str]:
    """bwrap options for /tmp and /var/tmp: dirs on the sandbox's quota filesystem, or (with
    the quota off) tmpfs, bounded by the memory limit only."""
    private = state.get("private_dirs")
    if not private:
        return ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    return [arg for inside, src in private.items() for arg in ("--bind", src, inside)]


def init_payload(config: dict[str, Any]) -> bytes:
    """What the init reads on stdin: source length, source, one JSON config line."""
    return b"%d\n%s%s\n" % (len(INIT_SOURCE), INIT_SOURCE, json.dumps(config).encode())


def reap_orphans(base: Path | str = "/run/inspect-sandboxes") -> list[str]:
    """Destroy sandboxes whose backend root was deleted (e.g. a test's tmp dir) while they ran.

    Every sandbox leaves a copy of its state next to its workspace mount, which lives outside
    the root; this finds the ones nobody can attach to any more. Returns their ids.
    """
    reaped = []
    for copy in Path(base).glob("*/*.state.json"):
        try:
            state = json.loads(copy.read_text())
            root = Path(state["root"])
        except (OSError, ValueError, KeyError):
            continue
        if (root / "sandboxes" / state["id"] / "state.json").exists():
            continue  # its backend still knows it: not an orphan
        backend = LocalBackend.__new__(LocalBackend)  # no probing, no dirs under a dead root
        backend.root, backend.mount_base = root, copy.parent
        backend.sandboxes_dir = root / "sandboxes"
        backend._procs = {}
        pid = state.get("init_pid")
        if pid and _proc_starttime(pid) == state.get("init_start"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        backend._destroy_with_state(state["id"], state)
        reaped.append(state["id"])
    return reaped
