"""Reading a checked-out repository on the host (as the worker, often root) without following
the links it commits.

A repository is untrusted input: `.inspect/environment.toml -> /etc/shadow`, or `.inspect ->
/root`, would otherwise make the worker read a host file and store it with the snapshot. Every
path component is opened relative to its parent's descriptor with O_NOFOLLOW, so a link anywhere
on the path is refused (ELOOP/ENOTDIR) rather than resolved.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO committed as a "file" must not hang the worker on open.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class LinkedPath(OSError):
    """A path in the repository is a symbolic link (or not a regular file/directory); the
    message names the repository-relative path, never what it points to."""


@contextlib.contextmanager
def _open_dir(root: Path, parts: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of `root/parts...`, every component opened without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for depth, part in enumerate(parts):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                    where = "/".join(parts[: depth + 1])
                    raise LinkedPath(exc.errno, f"{where} is a symbolic link") from None
                # A plain file where a directory would be: the path does not exist.
                raise FileNotFoundError(errno.ENOENT, "/".join(parts[: depth + 1])) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def read_repository_file(root: Path, relative: str, *, max_bytes: int) -> bytes | None:
    """The bytes of `root/relative`, or None when it does not exist. LinkedPath when it (or a
    directory on its path) is a symbolic link or not a regular file; ValueError when it is
    larger than `max_bytes`."""
    *dirs, name = Path(relative).parts
    try:
        with _open_dir(root, tuple(dirs)) as dir_fd:
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise LinkedPath(exc.errno, f"{relative} is a symbolic link") from None
                raise
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise LinkedPath(errno.EINVAL, f"{relative} is not a regular file")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{relative} is larger than {max_bytes} bytes")
    return data


def _hash_entry(dir_fd: int, name: str) -> str | None:
    """sha256 of a regular file's content, or of `symlink:` + its target for a link (what the
    repository says, never the file it points to); None for anything else."""
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        return hashlib.sha256(
            b"symlink:" + os.fsencode(os.readlink(name, dir_fd=dir_fd))
        ).hexdigest()
    if not stat.S_ISREG(info.st_mode):
        return None
    digest = hashlib.sha256()
    fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def lockfile_hashes(root: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """sha256 of each lockfile at the top of the tree and one level down (monorepos), keyed by
    repository-relative path. Linked directories are not entered; a linked lockfile is hashed
    as the link (its target string), so changing the link still marks the snapshot stale."""
    found: dict[str, str] = {}

    def scan(parts: tuple[str, ...], descend: bool) -> None:
        try:
            with _open_dir(root, parts) as fd:
                for name in sorted(os.listdir(fd)):
                    if name.startswith("."):  # .git, and hidden dirs as glob('*') skips them
                        continue
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if descend and stat.S_ISDIR(info.st_mode):
                        scan((*parts, name), descend=False)
                    elif any(fnmatch.fnmatchcase(name, p) for p in patterns):
                        digest = _hash_entry(fd, name)
                        if digest is not None:
                            found["/".join((*parts, name))] = digest
        except (LinkedPath, FileNotFoundError):
            return

    scan((), descend=True)
    return dict(sorted(found.items()))
