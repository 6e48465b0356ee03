"""The local sandbox backend: overlayfs snapshots + bubblewrap (or gVisor) isolation.

How a sandbox works
-------------------
``create()`` mounts the snapshot's layers copy-on-write (``overlay.py``), makes the sandbox's
cgroups (``cgroups.py``), sets up its egress (``egress_setup.py``), and starts ONE long-lived
process inside fresh namespaces: the command server ``sandbox_init/``, started by the runtime
this backend was made with (``bwrap.py`` or ``runsc.py``, which share ``launch.py``). It holds
the namespaces (mounts, /tmp, pid namespace, netns) alive, so background processes outlive the
command that started them. Every ``exec``, PTY and file operation is a request over the unix
socket ``sandboxes/<id>/ctl.sock`` (``local_sandbox.py``); because the socket and
``state.json`` are all a client needs, a restarted worker simply ``attach()`` es.

Two unprivileged host uids: the init is uid 0 of the sandbox's own user namespace, mapped to
``init_uid``, with a few capabilities there only (``launch.INIT_CAPS``); every command runs as
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
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from snapshots.sandbox import bwrap, egress_setup, netns, protocol, quota, runsc, seccomp
from snapshots.sandbox.base import (
    BackendUnavailable,
    Limits,
    NetworkPolicy,
    SandboxBackend,
    SandboxError,
    SandboxGone,
    SnapshotNotFound,
    SnapshotRef,
)
from snapshots.sandbox.cgroups import Cgroups
from snapshots.sandbox.cgroups import unavailable_reason as cgroups_unavailable
from snapshots.sandbox.gateway_door import (
    close_gateway_door,
    gateway_door_doctor,
    open_gateway_door,
)
from snapshots.sandbox.host_mounts import disk_on_host, leave_host_table
from snapshots.sandbox.launch import SANDBOX_PYTHON, proc_starttime, proc_state, write_etc
from snapshots.sandbox.local_sandbox import LocalSandbox
from snapshots.sandbox.overlay import (
    LayerStore,
    bind_mount,
    copy_tree,
    is_mounted,
    probe_overlay,
    umount,
)

log = logging.getLogger(__name__)

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# The command server's host uid, relative to the workload's (other helpers' uids, e.g. the NAT
# helper's, sit right above sandbox_uid).
INIT_UID_OFFSET = 999


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
    ``tools_dir``: the platform's agent CLIs (snapshots/agent_installs.py), mounted read-only
    at ``AGENT_TOOLS_MOUNT`` in every sandbox when it exists.
    ``init_uid``: the host uid of the sandbox's command server (uid 0 of its user namespace;
    default ``sandbox_uid + INIT_UID_OFFSET``): not the workload's, so commands cannot signal,
    trace or read it.
    ``gateway_socket``: the model gateway's unix socket; every sandbox reaches it at
    ``127.0.0.1:GATEWAY_PORT`` through its door (``gateway_door.py``). None: no door.
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
        gateway_socket: Path | str | None = None,
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
        self.gateway_socket = Path(gateway_socket).absolute() if gateway_socket else None
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
        self.etc_dir = write_etc(self.root, self.uid, self.gid)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._runtime_problem = self._check_runtime()

    # -- setup helpers --------------------------------------------------------------------

    def _check_runtime(self) -> str | None:
        if os.geteuid() != 0:
            return "the local backend must run as root (overlay mounts, cgroups, uid switch)"
        if not Path(SANDBOX_PYTHON).exists():
            return f"{SANDBOX_PYTHON} is missing (the in-sandbox init needs it)"
        if self.runtime == "bwrap":
            if not shutil.which("bwrap"):
                return "bubblewrap (bwrap) is not installed"
            return None
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
        return SnapshotRef(self.name, self.store.snapshot_of_dir(src, labels=labels))

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

    def snapshot_sandbox(self, sb: LocalSandbox) -> SnapshotRef:
        st = sb.state
        if st.get("runtime") == "runsc":
            # gVisor caches file data and metadata in its sentry and writes back lazily:
            # flush before reading the upper dir from the host.
            sb.run(["/bin/sync"], timeout=60)
        with self.store.writing(), disk_on_host(st):
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

    def alive(self, state: dict[str, Any]) -> bool:
        pid = state.get("init_pid")
        if not pid or proc_starttime(pid) != state.get("init_start"):
            return False
        # A killed init lingers as a zombie until reaped; and a sandbox whose state was
        # removed by terminate() is gone whatever its processes do.
        if proc_state(pid) in ("Z", "X", None):
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
                if self.alive(self._read_state(sid)):
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
            if not self.alive(state):
                self.destroy(path.name)
                dead.append(path.name)
        return dead

    def attach(self, sandbox_id: str) -> LocalSandbox:
        if not ID_RE.match(sandbox_id):
            raise SandboxGone(sandbox_id, "not a valid sandbox id")
        try:
            state = self._read_state(sandbox_id)
        except (OSError, ValueError):
            raise SandboxGone(sandbox_id, "no such sandbox on this machine") from None
        if not self.alive(state):
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
            if self.runtime == "bwrap":  # gVisor's gofer works on the host's mounts
                leave_host_table(state)
        except BaseException:
            self.destroy(sandbox_id)
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
            state["disk_device"] = disk.device
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
        if self.gateway_socket is not None:
            open_gateway_door(self.gateway_socket, self.mount_base, state, config)
        run_dir = self.mount_base / f"{state['id']}.run"
        if network.mode != "none" and not self._firewall_loaded:
            egress_setup.load_deny_list(
                state["id"], network.mode, self.nat_gid, self.egress_deny, self.egress_exceptions
            )
            self._firewall_loaded = True  # once per backend
        if network.mode == "allowlist":
            proxy = egress_setup.start_proxy(
                sdir,
                run_dir,
                state,
                network,
                env,
                config,
                hosts=self.egress_hosts,
                uid=self.uid,
                gid=self.nat_gid,
                deny=self.egress_deny,
                exceptions=self.egress_exceptions,
            )
            self.procs[state["id"] + ":proxy"] = proxy
            if cg is not None:
                cg.add(proxy.pid)  # counted against the sandbox, killed with it
        runtime = bwrap if self.runtime == "bwrap" else runsc
        runtime.spawn(self, sdir, state, network, config, cg)

    def start_nat(self, sdir: Path, state: dict[str, Any], **target: Any) -> None:
        """User-mode NAT for an ``open`` sandbox, ended with it."""
        nat = egress_setup.start_nat(sdir, state, self.nat_gid, **target)
        self.procs[state["id"] + ":nat"] = nat

    def tools_mount(self) -> Path | None:
        """The host directory of the platform's agent CLIs, if there is one to mount."""
        return self.tools_dir if self.tools_dir is not None and self.tools_dir.is_dir() else None

    def destroy(self, sandbox_id: str) -> None:
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
            if pid and (start is None or proc_starttime(pid) == start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if state.get("runtime") == "runsc":
            runsc.destroy(self, sandbox_id, state)
        cg = Cgroups(state.get("cgroups") or {})
        if not state.get("cgroups"):
            # A half-created sandbox may have cgroups not yet recorded in state.json.
            cg = Cgroups.existing(sandbox_id)
        cg.destroy()
        for key in (sandbox_id, *(f"{sandbox_id}:{k}" for k in ("proxy", "nat", "netns"))):
            proc = self.procs.pop(key, None)
            if proc is not None:
                if key != sandbox_id:  # a half-created sandbox has no state.json to name it
                    with contextlib.suppress(OSError):
                        proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)
        close_gateway_door(self.mount_base, sandbox_id)
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
        lines.append(gateway_door_doctor(self.gateway_socket))
        lines.append(f"sandbox uid: {self.uid} (commands), {self.init_uid} (command server)")
        abi = seccomp.landlock_abi()
        lines.append(
            f"secrets: commands given secrets run in their own Landlock domain (ABI {abi})"
            if abi and self.runtime == "bwrap"
            else "secrets: NO Landlock here: a running command's environment is readable by "
            "other commands of the sandbox while it runs (it is still ended when it returns)"
        )
        return lines


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
        backend.procs = {}
        pid = state.get("init_pid")
        if pid and proc_starttime(pid) == state.get("init_start"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        backend._destroy_with_state(state["id"], state)
        reaped.append(state["id"])
    return reaped
