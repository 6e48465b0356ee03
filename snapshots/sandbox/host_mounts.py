"""Keeping a running bubblewrap sandbox's mounts out of the host's mount table.

``create()`` mounts a sandbox's workspace (the overlay, or the bind of its copy), its disk quota
filesystem and its gateway door on the host, where bubblewrap binds them into the sandbox's own
mount namespace. Every new mount namespace starts as a copy of the host's table, and bubblewrap
then detaches the whole copy inside: left on the host, these mounts made each restore slower by
the number of sandboxes already running (bench/density.py). So once the sandbox's init answers
(bubblewrap has made all its mounts by then), the host's copies are detached
(``leave_host_table``): the sandbox's namespace holds the only references, so the overlay, the
disk and its loop device live exactly as long as the sandbox, and no other sandbox's namespace
is ever made from a table that holds them.

The host still reaches the disk: ``disk_on_host`` mounts the sandbox's loop device again for
the time of a snapshot (the same filesystem, checked to be the one the sandbox's /tmp is on),
and ``disk_stat_path`` is the sandbox's /tmp seen through its init (for ``statvfs``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from snapshots.sandbox import protocol
from snapshots.sandbox.base import SandboxError, SandboxGone
from snapshots.sandbox.launch import proc_starttime
from snapshots.sandbox.overlay import umount
from snapshots.sandbox.quota import mount_disk

SANDBOX_ONLY = "sandbox"  # state["mounts"]: the host's copies were detached


def wait_for_init(state: dict[str, Any], timeout: float = 10.0) -> None:
    """Block until the sandbox's init answers a ping: bubblewrap has made every mount."""
    path, dirfd = protocol.unix_path(Path(state["ctl"]))
    try:
        sock = protocol.connect(path, timeout=timeout)
        try:
            protocol.send_json(sock, {"op": "ping"})
            reply = protocol.recv_json(sock)
        finally:
            sock.close()
    except OSError as exc:
        msg = f"sandbox {state['id']}: its command server did not start: {exc}"
        raise SandboxError(msg) from None
    finally:
        if dirfd is not None:
            os.close(dirfd)
    if not reply.get("ok"):
        raise SandboxError(f"sandbox {state['id']}: its command server did not start")


def leave_host_table(state: dict[str, Any]) -> None:
    """Detach the host's copies of a started sandbox's mounts (its namespace keeps its own)."""
    wait_for_init(state)
    for key in ("workspace", "gateway_dir", "disk"):
        if state.get(key):
            umount(Path(state[key]))
    state["mounts"] = SANDBOX_ONLY


def _sandbox_tmp(state: dict[str, Any]) -> Path | None:
    """The sandbox's /tmp (on its disk) seen from the host through its live init, or None."""
    pid = state.get("init_pid")
    if not pid or proc_starttime(pid) != state.get("init_start"):
        return None
    return Path(f"/proc/{pid}/root/tmp")


def disk_stat_path(state: dict[str, Any]) -> Path | None:
    """A host path on the sandbox's disk filesystem, for ``statvfs``; None without one."""
    if not state.get("disk"):
        return None
    if state.get("mounts") != SANDBOX_ONLY:
        return Path(state["disk"])
    return _sandbox_tmp(state)


@contextlib.contextmanager
def disk_on_host(state: dict[str, Any]) -> Iterator[None]:
    """The sandbox's disk mounted at ``state["disk"]`` for the block (it is already there
    unless the host's copy was detached). Raises SandboxGone if the sandbox is not running:
    its loop device may then belong to another sandbox."""
    if not state.get("disk") or state.get("mounts") != SANDBOX_ONLY:
        yield
        return
    root = Path(state["disk"])
    tmp = _sandbox_tmp(state)
    try:
        expected = os.stat(tmp).st_dev if tmp is not None else None
    except OSError:
        expected = None
    if expected is None:
        raise SandboxGone(state["id"], "its processes have exited")
    try:
        mount_disk(state["disk_device"], root)
    except SandboxError:
        raise SandboxGone(state["id"], "its disk is gone") from None
    try:
        if os.stat(root).st_dev != expected:  # the device was freed and reused meanwhile
            raise SandboxGone(state["id"], "its processes have exited")
        yield
    finally:
        umount(root)
