"""The file operations of the file API (read, write, list), confined to /workspace: paths are
resolved inside the sandbox and opened one component at a time without following symlinks.
"""

import os
import posixpath
import stat

from .confine import give_to_workload
from .frames import jdump, recv, send

WORKSPACE = "/workspace"


class Escape(Exception):
    pass


def resolve(path, follow_last=True):
    """Map a file-API path to an absolute in-sandbox path under /workspace, or raise Escape.

    Runs inside the sandbox, so even a wrong answer could only reach what the sandbox itself
    can reach; the host never follows sandbox-controlled symlinks.
    """
    if path.startswith("/"):
        path = posixpath.normpath(path)
        if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
            raise Escape("absolute path outside the workspace")
        path = path[len(WORKSPACE) :]
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise Escape("'..' leaves the workspace")
            parts.pop()
        else:
            parts.append(part)
    full = posixpath.join(WORKSPACE, *parts)
    if follow_last:
        real = os.path.realpath(full)
    else:
        real = posixpath.join(os.path.realpath(posixpath.dirname(full)), posixpath.basename(full))
    if real != WORKSPACE and not real.startswith(WORKSPACE + "/"):
        raise Escape("a symlink leads outside the workspace")
    return real


def open_in_workspace(real, flags, mode=0o644, make_dirs=False):
    """Open ``real`` (a path ``resolve`` returned) one component at a time, never following a
    symlink: the init has more rights than the workload, so a symlink the workload swaps in
    while a request runs must not lead it anywhere. Directories it makes belong to the
    workload, like the file it creates."""
    rel = posixpath.relpath(real, WORKSPACE)
    parts = [] if rel == "." else rel.split("/")
    dirfd = os.open(WORKSPACE, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dirfd)
            except FileNotFoundError:
                if not make_dirs:
                    raise
                os.mkdir(part, 0o755, dir_fd=dirfd)
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dirfd)
                give_to_workload(nxt)
            os.close(dirfd)
            dirfd = nxt
        if not parts:
            return os.dup(dirfd)
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=dirfd)
    finally:
        os.close(dirfd)


def op_read(conn, lock, req):
    path = resolve(req["path"])
    with os.fdopen(open_in_workspace(path, os.O_RDONLY), "rb") as fh:
        data = fh.read()
    send(conn, lock, b"J", jdump({"ok": True, "size": len(data)}))
    send(conn, lock, b"D", data)


def op_write(conn, lock, req):
    path = resolve(req["path"], follow_last=False)
    if os.path.islink(path):
        path = resolve(req["path"])
    typ, data = recv(conn)
    if typ != b"D":
        raise ValueError("expected data frame")
    fd = open_in_workspace(
        path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, req.get("mode", 0o644), make_dirs=True
    )
    try:
        if os.fstat(fd).st_uid == os.getuid():
            give_to_workload(fd)
        os.write(fd, data) if len(data) < 1 << 20 else _write_all(fd, data)
        os.fchmod(fd, req.get("mode", 0o644))
    finally:
        os.close(fd)
    send(conn, lock, b"J", jdump({"ok": True}))


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def op_list(conn, lock, req):
    path = resolve(req["path"])
    entries = []
    rel_base = path[len(WORKSPACE) + 1 :] if path != WORKSPACE else ""
    with os.scandir(path) as it:
        for ent in it:
            st = ent.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                kind = "symlink"
            elif stat.S_ISDIR(st.st_mode):
                kind = "dir"
            elif stat.S_ISREG(st.st_mode):
                kind = "file"
            else:
                kind = "other"
            entries.append(
                {
                    "path": posixpath.join(rel_base, ent.name) if rel_base else ent.name,
                    "name": ent.name,
                    "kind": kind,
                    "size": st.st_size,
                    "mtime": st.st_mtime,
                    "mode": stat.S_IMODE(st.st_mode),
                }
            )
    entries.sort(key=lambda e: e["name"])
    send(conn, lock, b"J", jdump({"ok": True, "entries": entries}))
