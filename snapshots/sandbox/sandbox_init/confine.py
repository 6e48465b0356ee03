"""What the init and the commands it starts may do: the seccomp filter, Landlock domains, and the
workload's uid, which every command runs as (the init itself is uid 0 of the sandbox's user
namespace). ``CONFIG`` is the config line the host sent (``server.main`` fills it).
"""

import os

CONFIG: dict = {}

PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
# Landlock (same numbers on x86_64 and aarch64): a domain that handles only "make a block
# device" (which nobody here may do anyway) restricts nothing but ptrace-like access, which it
# limits to processes of the same domain or one nested in it.
NR_LANDLOCK_CREATE_RULESET = 444
NR_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_ACCESS_FS_MAKE_BLOCK = 1 << 11
_LIBC = None


def libc():
    global _LIBC
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def prctl(option, arg2=0):
    import ctypes

    args = [ctypes.c_ulong(a) for a in (option, arg2, 0, 0, 0)]
    if libc().prctl(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def install_seccomp(program):
    """Load a classic BPF seccomp filter (built by the host's snapshots/sandbox/seccomp.py)
    on this process; everything it starts inherits it."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buf))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    rc = libc().prctl(
        ctypes.c_ulong(PR_SET_SECCOMP),
        ctypes.c_ulong(SECCOMP_MODE_FILTER),
        ctypes.byref(fprog),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )
    if rc != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


def enter_own_domain():
    """Put the calling thread in a new Landlock domain. False where Landlock is missing
    (gVisor, old kernels): then only uids and the seccomp filter separate processes."""
    import ctypes

    attr = ctypes.c_uint64(LANDLOCK_ACCESS_FS_MAKE_BLOCK)
    sc = libc().syscall
    sc.restype = ctypes.c_long
    fd = sc(ctypes.c_long(NR_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(8), 0)
    if fd < 0:
        return False
    try:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        if sc(ctypes.c_long(NR_LANDLOCK_RESTRICT_SELF), ctypes.c_int(fd), 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)
    return True


def workload_user():
    """Popen arguments that drop a command to the workload uid (the init itself is uid 0)."""
    uid = CONFIG.get("workload_uid")
    if uid is None or os.getuid() == uid:
        return {}
    return {"user": uid, "group": CONFIG.get("workload_gid", uid), "extra_groups": []}


def give_to_workload(path_or_fd):
    """Files the init creates for the workload belong to the workload."""
    uid = CONFIG.get("workload_uid")
    if uid is None or os.getuid() == uid:
        return
    gid = CONFIG.get("workload_gid", uid)
    if isinstance(path_or_fd, int):
        os.fchown(path_or_fd, uid, gid)
    else:
        os.lchown(path_or_fd, uid, gid)
