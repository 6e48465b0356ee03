"""The model gateway's door into a local sandbox: ``http://127.0.0.1:GATEWAY_PORT`` inside every
sandbox reaches the platform's gateway, whatever the sandbox's egress (``none`` included).

The live preview's door, reversed. The gateway listens on a unix socket (the platform's
``INSPECT_GATEWAY_SOCKET``) in a directory of its own. That DIRECTORY is bind-mounted read-only
into each sandbox at ``GATEWAY_MOUNT``, and the sandbox's init forwards each connection to
``127.0.0.1:GATEWAY_PORT`` to the socket there (``sandbox_init/doors.py``). The directory, not
the socket: the gateway binds a temporary name and renames it over ``gateway.sock``, so a
gateway restarted while sandboxes run is seen through their existing mounts. When nothing
answers on the socket, the forwarder answers HTTP 503 saying the gateway is not running.

What the workload can do with it: connect to that one socket (it may equally connect to the
mounted socket itself). It cannot replace or remove it (the mount is read-only, and the
directory belongs to a host uid the sandbox does not map), and the forwarder's target is fixed
by the host's config, so the door leads nowhere else. The directory must therefore hold nothing
but the gateway's socket: ``prepare`` refuses one holding anything else (a socket configured
straight in /tmp, say).

Stdlib only (``snapshots/sandbox/`` imports neither Django nor any app).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path
from typing import Any

from snapshots.sandbox.base import GATEWAY_PORT, SandboxError
from snapshots.sandbox.overlay import bind_mount, is_mounted, umount

GATEWAY_MOUNT = "/run/inspect-gateway"


def prepare(socket_path: Path) -> Path:
    """The socket's directory, made if missing (0755: the sandbox's uids walk it; never deleted
    or recreated, so mounts of it stay valid). Raises SandboxError when it holds anything but
    sockets: mounting it would show those files to every sandbox."""
    try:
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        directory = socket_path.parent.resolve()  # what the mount shows, if it is a symlink
        info = directory.lstat()
    except OSError as exc:
        raise SandboxError(
            f"cannot make the gateway socket's directory {socket_path.parent}: "
            f"{exc.strerror or exc}; check INSPECT_GATEWAY_SOCKET"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise SandboxError(f"the gateway socket's directory {directory} is not a directory")
    strangers = sorted(entry.name for entry in os.scandir(directory) if not _is_socket(entry))
    if strangers:
        raise SandboxError(
            f"the gateway socket's directory {directory} holds more than the gateway's socket "
            f"({', '.join(strangers[:5])}); every sandbox would see it. Give "
            "INSPECT_GATEWAY_SOCKET a directory of its own (the default is "
            "<data dir>/gateway/gateway.sock)."
        )
    if info.st_mode & 0o777 != 0o755:
        directory.chmod(0o755)  # the gateway made it under the platform's umask 077
    return directory


def _is_socket(entry: os.DirEntry[str]) -> bool:
    try:
        return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return True  # renamed away meanwhile (the gateway's temporary name)


def inside_path(socket_path: Path) -> str:
    """Where the sandbox's init finds the gateway's socket."""
    return f"{GATEWAY_MOUNT}/{socket_path.name}"


def open_gateway_door(
    socket_path: Path, mount_base: Path, state: dict[str, Any], config: dict[str, Any]
) -> None:
    """Set a new sandbox up to reach the gateway: the directory its runtime mounts
    (``state["gateway_dir"]``) and the forwarder its init starts (``config``).

    The directory is first bound read-only at ``<mount_base>/<id>.gateway``, where the
    runtime can reach it: bubblewrap resolves a bind's source with the sandbox user's
    permissions (even given an fd), and the data dir above the socket is not theirs to walk.
    """
    source = prepare(socket_path)
    door = mount_base / f"{state['id']}.gateway"
    door.mkdir(exist_ok=True)
    try:
        bind_mount(source, door, read_only=True)
    except OSError as exc:
        raise SandboxError(
            f"sandbox {state['id']}: cannot mount the gateway's socket: {exc}"
        ) from None
    state["gateway_dir"] = str(door)
    config["gateway_port"] = GATEWAY_PORT
    config["gateway_socket"] = inside_path(socket_path)


def close_gateway_door(mount_base: Path, sandbox_id: str) -> None:
    """Undo ``open_gateway_door`` (idempotent; for half-made sandboxes too)."""
    door = mount_base / f"{sandbox_id}.gateway"
    if is_mounted(door):
        umount(door)
    with contextlib.suppress(OSError):
        door.rmdir()


def gateway_state(socket_path: Path) -> str | None:
    """None if the gateway answers on its socket, else what is wrong."""
    if not socket_path.exists():
        return f"nothing at {socket_path}: the gateway has not started"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(socket_path))
    except OSError as exc:
        return f"{socket_path} does not answer ({exc.strerror or exc}): the gateway is not running"
    finally:
        probe.close()
    return None


def gateway_door_doctor(socket_path: Path | None) -> str:
    """The doctor's line about the door and whether the gateway answers behind it."""
    if socket_path is None:
        return "model gateway door: OFF (no gateway socket configured)"
    where = f"127.0.0.1:{GATEWAY_PORT} in every sandbox -> {socket_path}"
    problem = gateway_state(socket_path)
    if problem:
        return f"model gateway door: {where}: DOWN: {problem} (sandboxes get HTTP 503)"
    return f"model gateway door: {where}: gateway answering"
