"""bubblewrap (``bwrap``) runtime for the local backend, beside ``runsc.py`` (gVisor).

The sandbox is the host kernel's namespaces, made by ``bwrap``: its own user, pid, ipc, uts,
cgroup and network namespaces, a read-only root of the host's /usr, the workspace mount and
private /tmp and /var/tmp. The command server (``sandbox_init/``) is started as uid 0 of the
sandbox's user namespace, which the host maps to ``init_uid`` once bwrap reports its child
(``--userns-block-fd``); bwrap then waits on ``--block-fd`` until the sandbox's cgroups and OOM
protection are set, so the init never runs unconfined. Its control socket is bound by the host
and passed in as an open fd; the seccomp filter is loaded by bwrap (``--seccomp``).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from snapshots.sandbox import protocol, seccomp
from snapshots.sandbox.base import AGENT_TOOLS_MOUNT, WORKSPACE, NetworkPolicy, SandboxError
from snapshots.sandbox.cgroups import Cgroups
from snapshots.sandbox.gateway_door import GATEWAY_MOUNT
from snapshots.sandbox.launch import (
    ETC_FILES,
    INIT_BOOT,
    INIT_CAPS,
    SANDBOX_PYTHON,
    Host,
    init_payload,
    proc_starttime,
)


def _tools_args(host: Host) -> list[str]:
    tools = host.tools_mount()
    if tools is None:
        return []
    # Explicit 0755 parents: the workload's uid is not the one bwrap makes them as.
    parents = ["/opt", "/opt/inspect", AGENT_TOOLS_MOUNT]
    return [*(a for p in parents for a in ("--perms", "0755", "--dir", p)),
            "--ro-bind", str(tools), AGENT_TOOLS_MOUNT]  # fmt: skip


def bwrap_argv(
    host: Host,
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
        *(["--ro-bind", state["gateway_dir"], GATEWAY_MOUNT] if state.get("gateway_dir") else []),
        *_tools_args(host),
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


def spawn(
    host: Host,
    sdir: Path,
    state: dict[str, Any],
    network: NetworkPolicy,
    config: dict[str, Any],
    cg: Cgroups | None,
) -> None:
    """Start the sandbox's init under bubblewrap; its pids and socket go into ``state``."""
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
    etc_fds = {name: os.open(host.etc_dir / name, os.O_RDONLY) for name in names}
    argv = bwrap_argv(host, network, state, info_w, block_r, etc_fds)
    userns_r, userns_w = os.pipe()
    seccomp_fd = seccomp_program_fd()
    argv = with_workload_modes(argv) + init_privilege_argv(userns_r, seccomp_fd)
    fds = [lsock.fileno(), info_w, block_r, userns_r, seccomp_fd, *etc_fds.values()]
    if network.mode == "allowlist":
        argv += ["--bind", str(host.mount_base / f"{state['id']}.run"), "/run/inspect"]
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
            user=host.init_uid,
            group=host.init_uid,
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
    host.procs[state["id"]] = proc
    assert proc.stdin is not None
    # Fits in the pipe buffer, so this does not block while bwrap waits on block_fd.
    proc.stdin.write(init_payload(config))
    proc.stdin.close()
    try:
        info = _read_info(info_r, proc, sdir)
        child = int(info["child-pid"])
        try:
            map_sandbox_uids(child, host.init_uid, host.uid, host.gid)
            os.write(userns_w, b"1")
        except OSError:
            pass  # bwrap died: reported below, when block_fd cannot be written either
    finally:
        os.close(info_r)
        os.close(userns_w)
    if network.mode == "open":
        try:
            host.start_nat(sdir, state, pid=child)
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
    state["init_start"] = proc_starttime(child)


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
