"""Per-sandbox disk quota: every byte a sandbox can write lands on its own small filesystem.

Each sandbox gets a sparse file ``sandboxes/<id>/disk.img`` of ``Limits.disk_bytes``, formatted
ext4 and loop-mounted at ``<mount_base>/<id>.disk``. Everything writable inside the sandbox lives
there: the overlay ``upper``/``work`` dirs behind ``/workspace`` (or the ``copy`` of the
snapshot where overlayfs is unavailable), and the directories bound on ``/tmp`` and ``/var/tmp``.
A write past the quota gets ENOSPC from that filesystem; the host's disk never holds more of
the sandbox than the image's size. gVisor's gofer writes through the same host mounts, so
``runsc`` sandboxes get the same quota.

Why this and not the alternatives (measured on this machine, ext4 root, kernel 6.18):

* ``tmpfs`` with ``size=`` costs ~0.1 ms but is memory: a 4 GB build would take 4 GB of RAM,
  charged against ``Limits.memory_mb``, so big dependency trees could not be installed.
* ext4/XFS project quotas need the data dir on a filesystem mounted with ``prjquota`` (the root
  filesystem here has no ``project`` feature and it cannot be turned on while mounted), which
  an operator cannot be expected to have.
* A loop-mounted image works on any filesystem that holds sparse files. Without a journal,
  resize reserve or initialised inode tables (``noinit_itable``: ext4's group checksums say
  which inodes are unused, so they never need zeroing) an empty 8 GB ext4 is ~190 KB of
  metadata. ``mkfs.ext4`` runs once per size (~10 ms); each sandbox gets a sparse clone of that
  template, then one ``LOOP_CONFIGURE`` ioctl and ``mount(2)``: ~3 ms per restore in all,
  O(1) in the size of the snapshot, as restore must stay. (mkfs per sandbox cost 10-16 ms.)

The loop device is attached with ``LO_FLAGS_AUTOCLEAR``: it detaches itself when the last mount
of the filesystem goes away (a lazy unmount of a busy sandbox included), so nothing leaks.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import os
import secrets
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from snapshots.sandbox.base import SandboxError
from snapshots.sandbox.overlay import umount

DEFAULT_DISK_BYTES = 8 * 1024**3
# The directories of the quota filesystem and where they appear inside the sandbox.
UPPER, WORK, COPY = "upper", "work", "copy"
PRIVATE_DIRS = {"tmp": "/tmp", "var-tmp": "/var/tmp"}

LOOP_CTL_GET_FREE = 0x4C82
LOOP_CONFIGURE = 0x4C0A
LO_FLAGS_AUTOCLEAR = 4
LOOP_MAJOR = 7
MS_NOSUID, MS_NODEV = 2, 4
# Bump when the mkfs options change, so that old templates are not reused.
TEMPLATE_VERSION = 1
# Smaller than this, ext4's own metadata would eat most of the space.
MIN_DISK_BYTES = 16 * 1024**2


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class _LoopInfo64(ctypes.Structure):
    _fields_ = [
        ("lo_device", ctypes.c_uint64),
        ("lo_inode", ctypes.c_uint64),
        ("lo_rdevice", ctypes.c_uint64),
        ("lo_offset", ctypes.c_uint64),
        ("lo_sizelimit", ctypes.c_uint64),
        ("lo_number", ctypes.c_uint32),
        ("lo_encrypt_type", ctypes.c_uint32),
        ("lo_encrypt_key_size", ctypes.c_uint32),
        ("lo_flags", ctypes.c_uint32),
        ("lo_file_name", ctypes.c_uint8 * 64),
        ("lo_crypt_name", ctypes.c_uint8 * 64),
        ("lo_encrypt_key", ctypes.c_uint8 * 32),
        ("lo_init", ctypes.c_uint64 * 2),
    ]


class _LoopConfig(ctypes.Structure):
    _fields_ = [
        ("fd", ctypes.c_uint32),
        ("block_size", ctypes.c_uint32),
        ("info", _LoopInfo64),
        ("reserved", ctypes.c_uint64 * 8),
    ]


def _mkfs() -> str | None:
    # /usr/sbin is not on every PATH (a non-login shell, a service unit): look there too.
    return shutil.which("mkfs.ext4") or shutil.which("mkfs.ext4", path="/usr/sbin:/sbin")


def problem() -> str | None:
    """None if per-sandbox quota filesystems can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root: loop devices and mounts need root"
    if not os.path.exists("/dev/loop-control"):
        return "/dev/loop-control is missing (no loop device support)"
    if not _mkfs():
        return "mkfs.ext4 is not installed (Debian package e2fsprogs)"
    return None


def _attach_loop(image: Path) -> tuple[str, int]:
    """A free loop device backed by ``image`` and an open fd of it. With AUTOCLEAR the device
    detaches at its last close or unmount, so the caller closes the fd once it is mounted."""
    backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    try:
        control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
        try:
            for _ in range(32):  # another process may take the free device first
                number = fcntl.ioctl(control, LOOP_CTL_GET_FREE)
                device = f"/dev/loop{number}"
                if not os.path.exists(device):  # no devtmpfs (some containers)
                    with contextlib.suppress(FileExistsError):
                        os.mknod(device, stat.S_IFBLK | 0o600, os.makedev(LOOP_MAJOR, number))
                loop = os.open(device, os.O_RDWR | os.O_CLOEXEC)
                try:
                    config = _LoopConfig(fd=backing)
                    config.info.lo_flags = LO_FLAGS_AUTOCLEAR
                    fcntl.ioctl(loop, LOOP_CONFIGURE, bytes(config))
                    return device, loop
                except OSError as exc:
                    os.close(loop)
                    if exc.errno != errno.EBUSY:
                        raise
            raise SandboxError("no free loop device for the sandbox's disk quota")
        finally:
            os.close(control)
    finally:
        os.close(backing)


def _template(directory: Path, size_bytes: int) -> Path:
    """An empty ext4 image of ``size_bytes``, formatted once per size and then cloned: its few
    hundred KB of metadata copy in well under a millisecond, where running mkfs.ext4 for every
    sandbox would add 5-10 ms to each restore. Clones share a filesystem UUID, which ext4
    does not mind."""
    path = directory / f"ext4-{size_bytes}-v{TEMPLATE_VERSION}.img"
    if path.exists():
        return path
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging = directory / f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(staging, "xb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.truncate(size_bytes)  # sparse: costs nothing until written
        proc = subprocess.run(
            [
                _mkfs() or "mkfs.ext4", "-q", "-F",
                # No journal (a sandbox does not survive a host crash anyway) and no blocks
                # reserved for growing the filesystem: 4 MB less to write per 8 GB.
                "-O", "^has_journal,^resize_inode",
                "-m", "0",  # root's reserve would be out of the sandbox user's reach
                "-E", "lazy_itable_init=1,nodiscard",
                str(staging),
            ],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SandboxError(f"cannot format the sandbox's disk: {proc.stderr.strip()}")
        os.rename(staging, path)  # atomic: concurrent workers see a whole template or none
    finally:
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
    return path


def _clone_sparse(src: Path, dst: Path) -> None:
    """Copy ``src`` to a new file ``dst``, data extents only: the holes stay holes."""
    with open(src, "rb") as fin, open(dst, "xb") as fout:
        os.fchmod(fout.fileno(), 0o600)
        size = os.fstat(fin.fileno()).st_size
        fout.truncate(size)
        position = 0
        while position < size:
            try:
                start = os.lseek(fin.fileno(), position, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole is left
                    break
                raise
            end = os.lseek(fin.fileno(), start, os.SEEK_HOLE)
            while start < end:
                copied = os.copy_file_range(fin.fileno(), fout.fileno(), end - start, start, start)
                if copied <= 0:
                    raise SandboxError(f"copying {src} stopped at byte {start}")
                start += copied
            position = end


@dataclass(frozen=True)
class SandboxDisk:
    """The quota filesystem of one sandbox, mounted at ``root``."""

    root: Path
    size_bytes: int
    device: str  # the loop device, which detaches itself when the last mount of it goes

    @classmethod
    def create(
        cls, image: Path, root: Path, size_bytes: int, uid: int, gid: int, *, templates: Path
    ) -> SandboxDisk:
        """Make, mount and lay out a ``size_bytes`` filesystem; raises SandboxError.
        ``templates`` caches one freshly formatted image per size (see ``_template``)."""
        if size_bytes < MIN_DISK_BYTES:
            raise SandboxError(
                f"Limits.disk_bytes={size_bytes} is below the minimum of {MIN_DISK_BYTES} bytes"
            )
        _clone_sparse(_template(templates, size_bytes), image)
        root.mkdir(mode=0o700, exist_ok=True)
        device, loop = _attach_loop(image)
        try:
            mount_disk(device, root)
        finally:
            os.close(loop)  # the mount now holds the device
        # Root-owned, traversable by the sandbox user (bwrap binds the private dirs as that
        # user), not listable.
        root.chmod(0o711)
        (root / "lost+found").rmdir()
        for name in (UPPER, WORK, *PRIVATE_DIRS):
            (root / name).mkdir()
        for name in (UPPER, *PRIVATE_DIRS):
            os.chown(root / name, uid, gid)
            (root / name).chmod(0o755)
        return cls(root, size_bytes, device)

    @staticmethod
    def release(image: Path, root: Path) -> None:
        """Unmount (lazily if still busy) and delete the image. Idempotent."""
        umount(root)
        with contextlib.suppress(OSError):
            root.rmdir()
        with contextlib.suppress(FileNotFoundError):
            image.unlink()


def mount_disk(device: str, root: Path) -> None:
    """Mount a sandbox's disk filesystem (again, for a snapshot: ``host_mounts``) on ``root``."""
    flags = MS_NOSUID | MS_NODEV
    if _libc.mount(device.encode(), str(root).encode(), b"ext4", flags, b"noinit_itable"):
        err = ctypes.get_errno()
        raise SandboxError(f"cannot mount the sandbox's disk on {root}: {os.strerror(err)}")


def is_full(root: Path, size_bytes: int) -> bool:
    """True when the quota filesystem at ``root`` is (nearly) out of blocks or inodes: a
    command that failed now most likely failed on ENOSPC."""
    try:
        st = os.statvfs(root)
    except OSError:
        return False
    free = st.f_bavail * st.f_frsize
    return free < max(1024**2, size_bytes // 100) or st.f_favail == 0
