"""gVisor (``runsc``) runtime for the local backend, beside ``bwrap.py``.

The sandbox is an OCI container run detached by ``runsc run --detach``: the same command server
(``sandbox_init/``) is its init, but it runs on gVisor's user-space kernel instead of the host
kernel. Differences from bubblewrap, all forced by gVisor:

* No fd passing into the sandbox: the init binds its control socket itself at
  ``/run/inspect/ctl.sock``, a host directory bind-mounted in; ``--host-uds=all`` lets that socket
  (and the egress proxy's) cross the gVisor boundary.
* The init is gVisor's root with ``INIT_CAPS`` only and starts every command as the workload
  uid; it installs the seccomp filter on itself first, and its socket is 0600 in a root-owned
  directory. This build allows a child subreaper only as pid 1, so a contained command's tree
  is found by a supplementary group of its own (see ``sandbox_init.reaper.run_reaper``); it has no
  Landlock, and shows every process's ``/proc/<pid>/environ`` to every other (mode 0444), so
  ``start`` services with secrets are refused here.
* Limits: runsc applies memory/cpu ``linux.resources`` to cgroups it creates at
  ``/sys/fs/cgroup/<controller>/inspect-sandboxes/<id>``. Memory is charged to the sentry as a
  whole, so hitting the limit OOM-kills the entire sandbox (reported as ``limit_hit='memory'``,
  after which the sandbox is gone). Process count is RLIMIT_NPROC inside gVisor; a fork refused
  by it is not attributed (``limit_hit`` stays None).
* This Debian 2022 build rejects the statx() flags Debian 12's coreutils use, so ``ls DIR``,
  ``ls -l`` and ``stat`` fail inside with "Invalid argument" (``known_issues()`` probes it).
* The default ``ptrace`` platform is used: the Debian 2022 build's ``kvm`` platform hangs
  at 100 % CPU on this kernel, so it is never selected.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from snapshots.sandbox import netns, seccomp
from snapshots.sandbox.base import AGENT_TOOLS_MOUNT, WORKSPACE, NetworkPolicy, SandboxError
from snapshots.sandbox.cgroups import Cgroups
from snapshots.sandbox.gateway_door import GATEWAY_MOUNT
from snapshots.sandbox.launch import (
    ETC_FILES,
    ETC_WRITTEN,
    INIT_BOOT,
    INIT_CAPS,
    SANDBOX_PYTHON,
    Host,
    init_payload,
    proc_starttime,
)

RUNSC = "runsc"
PLATFORM = "ptrace"


@functools.cache
def problem() -> str | None:
    """None if runsc can start a sandbox here, else exactly why not (probed once)."""
    path = shutil.which(RUNSC)
    if not path:
        return "runsc is not installed"
    if os.geteuid() != 0:
        return "runsc needs root here (rootful OCI runtime with cgroups)"
    try:
        proc = subprocess.run(
            [path, f"--platform={PLATFORM}", "--network=none", "do", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return f"`runsc --platform={PLATFORM} do /bin/true` did not finish within 30 s"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return f"`runsc do /bin/true` failed: {' | '.join(tail)}"
    return None


@functools.cache
def known_issues() -> list[str]:
    """Compatibility problems of this runsc build that users will notice (probed once)."""
    if problem():
        return []
    issues = []
    try:
        proc = subprocess.run(
            [RUNSC, f"--platform={PLATFORM}", "--network=none", "do", "/usr/bin/stat", "/"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode != 0 and "Invalid argument" in proc.stderr:
            issues.append(
                "statx() fails with EINVAL under this gVisor build, so Debian 12 coreutils "
                "`ls DIR`, `ls -l`, `stat` report 'Invalid argument' (find, Python os.stat work)"
            )
    except (OSError, subprocess.TimeoutExpired):
        pass
    return issues


def version() -> str:
    try:
        out = subprocess.run([RUNSC, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.splitlines()[0] if out.stdout else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _state_root(host: Host) -> Path:
    path = host.root / "runsc" / "state"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _rootfs(host: Host) -> Path:
    """A tiny read-only root: mount points, /etc essentials and the /usr-merge symlinks."""
    rootfs = host.root / "runsc" / "rootfs"
    if (rootfs / ".ready-4").exists():
        return rootfs
    rootfs.mkdir(parents=True, exist_ok=True)
    for d in (
        "usr",
        "etc",
        "tmp",
        "proc",
        "dev",
        "sys",
        "run/inspect",
        GATEWAY_MOUNT.lstrip("/"),
        "var/tmp",
        "workspace",
        "opt/inspect/agents",
    ):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    for name, target in (
        ("bin", "usr/bin"),
        ("sbin", "usr/sbin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
    ):
        with contextlib.suppress(FileExistsError):
            (rootfs / name).symlink_to(target)
    for name in ETC_FILES:
        src = Path("/etc") / name
        if src.exists():
            subprocess.run(["cp", "-a", str(src), str(rootfs / "etc" / name)], check=False)
    for name in ETC_WRITTEN:
        shutil.copy(host.etc_dir / name, rootfs / "etc" / name)
    # Explicit modes: platform processes run under umask 077; the sandbox user walks these.
    for path in [rootfs, *rootfs.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / ".ready-4").touch()
    return rootfs


def _spec(
    host: Host,
    state: dict[str, Any],
    network: NetworkPolicy,
    run_dir: Path,
) -> dict[str, Any]:
    limits = state["limits"]
    resources: dict[str, Any] = {}
    if limits.get("memory_mb"):
        resources["memory"] = {"limit": int(limits["memory_mb"]) * 1024 * 1024}
    # No host pids limit: the sentry's Go threads would count against it and the whole
    # sandbox would die. Limits.pids becomes RLIMIT_NPROC inside (see LocalBackend._spawn), which
    # gVisor counts per sandbox because its uids are its own.
    if limits.get("cpus"):
        resources["cpu"] = {"quota": int(limits["cpus"] * 100_000), "period": 100_000}
    mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/dev",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
        },
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
        },
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "noexec", "nodev", "mode=1777"],
        },
        {
            "destination": "/sys",
            "type": "sysfs",
            "source": "sysfs",
            "options": ["nosuid", "noexec", "nodev", "ro"],
        },
        {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]},
        {
            "destination": WORKSPACE,
            "type": "bind",
            "source": state["workspace"],
            "options": ["rbind", "rw"],
        },
        {
            "destination": "/run/inspect",
            "type": "bind",
            "source": str(run_dir),
            "options": ["rbind", "rw"],
        },
    ]
    if state.get("gateway_dir"):
        # Read-only; the gateway's socket is reached across the gVisor boundary by
        # --host-uds, and a rename over it on the host is seen (mounts are "shared").
        mounts.append(
            {"destination": GATEWAY_MOUNT, "type": "bind", "source": state["gateway_dir"],
             "options": ["rbind", "ro"]}
        )  # fmt: skip
    tools = host.tools_mount()
    if tools is not None:
        mounts.append(
            {"destination": AGENT_TOOLS_MOUNT, "type": "bind", "source": str(tools),
             "options": ["rbind", "ro"]}
        )  # fmt: skip
    # /tmp and /var/tmp: dirs on the sandbox's quota filesystem (quota.py), like the workspace's
    # upper dir; sentry tmpfs (memory, bounded by the memory limit only) when the quota is off.
    private = state.get("private_dirs") or {}
    for inside in ("/tmp", "/var/tmp"):
        if inside in private:
            mounts.append(
                {"destination": inside, "type": "bind", "source": private[inside],
                 "options": ["rbind", "rw"]}
            )  # fmt: skip
        else:
            mounts.append(
                {
                    "destination": inside,
                    "type": "tmpfs",
                    "source": "tmpfs",
                    "options": ["mode=1777"],
                }
            )
    # Its own network namespace whatever the mode (see spawn): a new, empty one for none and
    # allowlist; for open, the one whose only device is slirp4netns' tap.
    netns_spec: dict[str, str] = {"type": "network"}
    if network.mode == "open":
        netns_spec["path"] = state["netns_path"]
    caps = list(INIT_CAPS)
    return {
        "ociVersion": "1.0.0",
        "process": {
            # The init is gVisor's root with INIT_CAPS only; it starts every command as the
            # workload uid (the backend's uid), which then holds no capability at all.
            "user": {"uid": 0, "gid": 0},
            "args": [SANDBOX_PYTHON, "-I", "-S", "-c", INIT_BOOT],
            "env": ["PATH=/usr/bin:/bin", "HOME=/tmp"],
            "cwd": WORKSPACE,
            "capabilities": {
                "bounding": caps,
                "effective": caps,
                "inheritable": [],
                "permitted": caps,
                "ambient": [],
            },
            "noNewPrivileges": True,
        },
        "root": {"path": str(_rootfs(host)), "readonly": True},
        "hostname": "sandbox",
        "mounts": mounts,
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")] + [netns_spec],
            "resources": resources,
            "cgroupsPath": f"/inspect-sandboxes/{state['id']}",
        },
    }


def spawn(
    host: Host,
    sdir: Path,
    state: dict[str, Any],
    network: NetworkPolicy,
    config: dict[str, Any],
    cg: Cgroups | None,
) -> None:
    # Network: gVisor joins the spec's network namespace whatever --network says, so "host"
    # here means the sandbox's own namespace, not this machine's. ``open`` uses it (gVisor's
    # sockets go to the tap of slirp4netns, whose host side the egress table confines);
    # "sandbox" (gVisor's netstack on a scraped device) cannot be used: this 2022 build
    # takes every namespace for the root one on kernels >= 6 (/proc/sys/net/core/rmem_default
    # exists in all of them) and refuses to start. none and allowlist use "none": loopback only.
    if network.mode == "open":
        try:
            holder = netns.hold_netns()
        except RuntimeError as exc:
            raise SandboxError(f"sandbox {state['id']}: {exc}") from None
        host.procs[state["id"] + ":netns"] = holder
        state["netns_pid"], state["netns_start"] = holder.pid, proc_starttime(holder.pid)
        state["netns_path"] = f"/proc/{holder.pid}/ns/net"
        host.start_nat(sdir, state, netns_path=state["netns_path"])
    run_dir = host.mount_base / f"{state['id']}.run"
    # Root's (the init's, inside): the workload can neither replace nor reach the init's
    # socket there (the init makes it 0600).
    os.chown(run_dir, 0, 0)
    run_dir.chmod(0o755)
    # gVisor runs its own seccomp for the sentry; this one is for the sandbox's processes, and
    # the init installs it on itself before anything else.
    config["seccomp"] = base64.b64encode(seccomp.build_filter()).decode()
    bundle = sdir / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(_spec(host, state, network, run_dir)))
    config["listen_path"] = "/run/inspect/ctl.sock"
    ctl = run_dir / "ctl.sock"
    state["ctl"] = str(ctl)
    argv = [
        RUNSC,
        f"--root={_state_root(host)}",
        f"--platform={PLATFORM}",
        f"--network={'host' if network.mode == 'open' else 'none'}",
        "--host-uds=all",
        "run",
        "--detach",
        f"--bundle={bundle}",
        f"--pid-file={sdir / 'runsc.pid'}",
        state["id"],
    ]
    log = open(sdir / "init.log", "wb")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            start_new_session=True,
            umask=0o022,  # the sandbox's own files keep ordinary modes (the host's is 077)
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        log.close()
    assert proc.stdin is not None
    proc.stdin.write(init_payload(config))
    proc.stdin.close()
    if proc.wait(timeout=60) != 0:
        err = (sdir / "init.log").read_text(errors="replace").strip()
        raise SandboxError(f"runsc failed to start the sandbox: {err[-2000:]}")
    pid = int((sdir / "runsc.pid").read_text().strip())
    deadline = time.monotonic() + 20
    while not ctl.exists():
        if time.monotonic() > deadline:
            raise SandboxError(
                "the gVisor sandbox started but its command server never came up (see init.log)"
            )
        time.sleep(0.002)
    state["init_pid"] = pid
    state["init_start"] = proc_starttime(pid)
    state["cgroups"] = {
        ctl_name: f"/sys/fs/cgroup/{ctl_name}/inspect-sandboxes/{state['id']}"
        for ctl_name in ("memory", "pids")
        if Path(f"/sys/fs/cgroup/{ctl_name}/inspect-sandboxes/{state['id']}").is_dir()
    }


def destroy(host: Host, sandbox_id: str, state: dict[str, Any]) -> None:
    """Release runsc's own bookkeeping. The caller has already SIGKILLed the sandbox process;
    ``runsc delete`` then still takes ~1.5 s polling for it, so it runs in the background."""
    root = host.root / "runsc" / "state"
    if not root.is_dir():
        return
    with contextlib.suppress(OSError):
        proc = subprocess.Popen(
            [RUNSC, f"--root={root}", "delete", "--force", sandbox_id],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        threading.Thread(target=proc.wait, daemon=True).start()
