"""The seccomp filter every local sandbox runs under (bubblewrap ``--seccomp FD``; under gVisor
the command server installs the same program on itself before serving).

It refuses, with EPERM (never a kill, so a tool that probes a call degrades instead of dying):

* reading or steering another process: ``ptrace``, ``process_vm_readv/writev``,
  ``pidfd_getfd`` (stealing another process's fds, e.g. the command server's socket), ``kcmp``;
* nested user namespaces: ``unshare`` and ``clone`` with ``CLONE_NEWUSER``, ``setns``;
  ``clone3`` answers ENOSYS because its flags sit in memory seccomp cannot read, which makes
  glibc fall back to ``clone`` (Docker's profile does the same);
* the rest of what Docker's default profile refuses to a container without CAP_SYS_ADMIN:
  keyrings, bpf, perf events, mounts, kexec, kernel modules, file handles, userfaultfd, swap,
  reboot, accounting, the clock, io_uring, NUMA memory policy;
* every other ABI: on x86_64 the i386 and x32 system calls (whose numbers differ and would
  slip past the list).

Classic BPF, written by hand (no libseccomp binding is needed): one ``struct sock_filter``
is ``<HBBI`` (code, jump-if-true, jump-if-false, k) and the kernel hands the program a
``struct seccomp_data``: ``nr`` at offset 0, ``arch`` at 4, ``args[i]`` at ``16 + 8 * i``.
"""

from __future__ import annotations

import errno
import functools
import platform
import struct

# BPF opcodes (linux/filter.h, linux/bpf_common.h).
LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = u32 at offset k of seccomp_data
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K: jump if A & k
RET_K = 0x06  # BPF_RET | BPF_K

RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000  # | errno

OFFSET_NR, OFFSET_ARCH = 0, 4
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# Refused outright. Names present on one architecture only are simply absent on the other.
REFUSED = (
    *("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "setns"),
    *("keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd"),
    *("mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick"),
    *("open_tree", "move_mount", "mount_setattr"),
    *("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"),
    *("open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot", "acct"),
    *("syslog", "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "quotactl"),
    *("lookup_dcookie", "io_uring_setup", "io_uring_enter", "io_uring_register"),
    *("set_mempolicy", "mbind", "move_pages", "iopl", "ioperm", "uselib", "ustat", "sysfs"),
    *("_sysctl", "nfsservctl", "create_module", "get_kernel_syms", "query_module"),
)
# Refused only when their first argument (flags) asks for a new user namespace.
REFUSED_WITH_NEWUSER = ("unshare", "clone")

SYSCALLS = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
        "kcmp": 312, "setns": 308, "unshare": 272, "clone": 56, "clone3": 435,
        "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "mount": 165, "umount2": 166,
        "pivot_root": 155, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "open_tree": 428, "move_mount": 429, "mount_setattr": 442, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "swapon": 167, "swapoff": 168,
        "reboot": 169, "acct": 163, "syslog": 103, "vhangup": 153, "settimeofday": 164,
        "clock_settime": 227, "clock_adjtime": 305, "quotactl": 179, "lookup_dcookie": 212,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "set_mempolicy": 238, "mbind": 237, "move_pages": 279, "iopl": 172, "ioperm": 173,
        "uselib": 134, "ustat": 136, "sysfs": 139, "_sysctl": 156, "nfsservctl": 180,
        "create_module": 174, "get_kernel_syms": 177, "query_module": 178,
    },
    # The generic table (include/uapi/asm-generic/unistd.h).
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
        "kcmp": 272, "setns": 268, "unshare": 97, "clone": 220, "clone3": 435,
        "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "mount": 40, "umount2": 39,
        "pivot_root": 41, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "open_tree": 428, "move_mount": 429, "mount_setattr": 442, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "swapon": 224, "swapoff": 225,
        "reboot": 142, "acct": 89, "syslog": 116, "vhangup": 58, "settimeofday": 170,
        "clock_settime": 112, "clock_adjtime": 266, "quotactl": 60, "lookup_dcookie": 18,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "set_mempolicy": 237, "mbind": 235, "move_pages": 239, "nfsservctl": 42,
    },
}  # fmt: skip


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 without Landlock): the local backend gives every
    command given secrets a Landlock domain of its own (see
    sandbox_init.confine.enter_own_domain)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(version))


class UnsupportedArchitecture(RuntimeError):
    """No syscall table for this machine: the sandbox must not start without its filter."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


@functools.cache
def build_filter(machine: str | None = None) -> bytes:
    """The filter for ``machine`` (default: this one, ``uname -m``) as the raw
    ``struct sock_filter`` array bubblewrap's ``--seccomp`` reads."""
    machine = machine or platform.machine()
    if machine not in SYSCALLS:
        raise UnsupportedArchitecture(
            f"no seccomp syscall table for {machine!r} (known: {', '.join(SYSCALLS)}); "
            "local sandboxes refuse to start without their filter"
        )
    table = SYSCALLS[machine]
    eperm = _insn(RET_K, RET_ERRNO | errno.EPERM)
    prog = [
        _insn(LD_ABS_W, OFFSET_ARCH),
        _insn(JEQ_K, AUDIT_ARCH[machine], jt=1),  # another ABI (i386, arm32): refuse it all
        eperm,
        _insn(LD_ABS_W, OFFSET_NR),
    ]
    if machine == "x86_64":
        prog += [_insn(JGE_K, X32_SYSCALL_BIT, jf=1), eperm]  # the x32 ABI
    for name in REFUSED:
        if name in table:
            prog += [_insn(JEQ_K, table[name], jf=1), eperm]
    prog += [_insn(JEQ_K, table["clone3"], jf=1), _insn(RET_K, RET_ERRNO | errno.ENOSYS)]
    for name in REFUSED_WITH_NEWUSER:
        # nr == name ? (A = low word of args[0]; A & CLONE_NEWUSER ? EPERM : ALLOW) : next
        prog += [
            _insn(JEQ_K, table[name], jf=4),
            _insn(LD_ABS_W, 16),
            _insn(JSET_K, CLONE_NEWUSER, jf=1),
            eperm,
            _insn(RET_K, RET_ALLOW),
        ]
    prog.append(_insn(RET_K, RET_ALLOW))
    return b"".join(prog)
