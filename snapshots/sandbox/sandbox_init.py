"""The init / command server that runs INSIDE a local sandbox.

Started once per sandbox as ``/usr/bin/python3 -I -S -c BOOT`` under bubblewrap or gVisor; its
source and a JSON config line arrive on stdin (so secrets in the config never show in argv).
It holds the sandbox's namespaces alive (when it exits the sandbox dies) and serves a tiny
framed protocol on a unix socket, so any host process -- including a worker that restarted --
can run commands, PTYs and file operations in the same live sandbox.

It must only use the stdlib of the sandbox's /usr/bin/python3 and import nothing from the
project (the project is not inside the sandbox). ``protocol`` helpers are duplicated in
``local.py`` on purpose; keep the two in sync.

Who can touch whom (issue 14): the init runs as uid 0 of the sandbox's user namespace (a host
uid of its own), non-dumpable; every command runs as the workload uid with no capabilities, so
it can neither signal, trace nor read the init. A command given secrets (``contain``) is started
by a *reaper* (a child subreaper forked from the launcher, which the init forks before anything
else): the command gets a Landlock domain of its own, a sibling of the one every other command
inherits from the init, so no other command can read its /proc/<pid>/environ or mem, and when it
returns the reaper ends every process it left (unless it is a ``service``).

Frames: 1 type byte + 4-byte big-endian length + payload.
  client -> server: J request json, D data, K kill, I pty input, R resize json
  (after the ok reply to a `connect` request the connection carries raw bytes, no frames)
  server -> client: J reply json, D data, O stdout, E stderr, P pty output, X exit json
"""

import contextlib
import errno
import json
import os
import posixpath
import selectors
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time

WORKSPACE = "/workspace"
HDR = struct.Struct("!cI")
# Every command goes through this shim: it undoes the OOM protection the host gave to the
# init (so the OOM killer picks the real memory hog) and, for PTYs, makes the terminal the
# controlling tty of the new session, all without preexec_fn (unsafe in a threaded server).
SHIM = 'echo 0 >/proc/self/oom_score_adj 2>/dev/null; {tty}exec "$@"'
CONFIG: dict = {}
LAUNCHER = None  # socket to the launcher process (see start_launcher)
LAUNCHER_LOCK = threading.Lock()

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


def send(sock, lock, typ, payload=b""):
    with lock:
        sock.sendall(HDR.pack(typ, len(payload)) + payload)


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv(sock):
    hdr = recv_exact(sock, HDR.size)
    if hdr is None:
        return None, None
    typ, size = HDR.unpack(hdr)
    payload = recv_exact(sock, size) if size else b""
    if payload is None:
        return None, None
    return typ, payload


def jdump(obj):
    return json.dumps(obj).encode()


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


def base_env(extra):
    env = {
        # The platform's agent CLIs first (AGENT_TOOLS_MOUNT): a repository cannot shadow them.
        "PATH": "/opt/inspect/agents/bin:/usr/local/bin:/usr/bin:/bin:"
        "/usr/local/sbin:/usr/sbin:/sbin",
        "HOME": "/tmp",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "PWD": WORKSPACE,
    }
    env.update(CONFIG.get("env") or {})
    env.update(extra or {})
    return env


def drain_forever(fds):
    """Keep reading (and dropping) pipes still held by background processes after the main
    command exited, so a daemon that logs to its inherited stdout never gets EPIPE."""
    sel = selectors.DefaultSelector()
    for fd in fds:
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            for key, _ in sel.select():
                try:
                    data = os.read(key.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    finally:
        sel.close()


def exit_notifier(proc):
    """An fd that becomes readable when ``proc`` exits: a pidfd, or (gVisor lacks
    pidfd_open) a pipe written by a thread blocked in waitid(WNOWAIT)."""
    if isinstance(proc, Contained):
        return proc.exit_fd()
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pass
    r, w = os.pipe()

    def waiter():
        with contextlib.suppress(OSError):
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        os.write(w, b"x")
        os.close(w)

    try:
        threading.Thread(target=waiter, daemon=True).start()
    except RuntimeError:  # no thread slots left (process limit): poll instead
        os.close(r)
        os.close(w)
        return None
    return r


def op_exec(conn, lock, req):
    argv = req["argv"]
    cwd = req.get("cwd") or WORKSPACE
    if not cwd.startswith("/"):
        cwd = posixpath.join(WORKSPACE, cwd)
    env = base_env(req.get("env"))
    timeout = req.get("timeout")
    pty_opts = req.get("pty")
    master = None
    tty_redirect = ""
    if pty_opts:
        import fcntl
        import termios

        master, slave = os.openpty()
        give_to_workload(slave)  # the command re-opens it by name (see tty_redirect)
        fcntl.ioctl(
            master,
            termios.TIOCSWINSZ,
            struct.pack("HHHH", pty_opts["rows"], pty_opts["cols"], 0, 0),
        )
        env.setdefault("TERM", "xterm-256color")
        # Re-opening the tty in the new session leader makes it the controlling terminal.
        tty_name = os.ttyname(slave)
        tty_redirect = f"exec 0<>{tty_name} 1>&0 2>&0; "
        stdio = {"stdin": slave, "stdout": slave, "stderr": slave}
    else:
        stdio = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    shim = ["/bin/sh", "-c", SHIM.format(tty=tty_redirect), "sh", *argv]
    try:
        if req.get("contain"):
            proc = Contained(shim, env, cwd, stdio, service=bool(req.get("service")))
        else:
            proc = subprocess.Popen(
                shim, env=env, cwd=cwd, start_new_session=True, **workload_user(), **stdio
            )
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "spawn")
        send(
            conn,
            lock,
            b"J",
            jdump({"ok": False, "error": "spawn", "errno": name, "message": str(exc)}),
        )
        return
    finally:
        if master is not None:
            os.close(slave)
    send(conn, lock, b"J", jdump({"ok": True, "pid": proc.pid}))
    start = time.monotonic()
    deadline = start + timeout if timeout else None
    pidfd = exit_notifier(proc)
    sel = selectors.DefaultSelector()
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    sel.register(conn, selectors.EVENT_READ, "conn")
    outs = {}
    if master is not None:
        outs[master] = b"P"
    else:
        outs[proc.stdout.fileno()] = b"O"
        outs[proc.stderr.fileno()] = b"E"
    for fd in outs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, "out")
    timed_out = False
    client_gone = False

    def kill_group():
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)

    def pump(fd, until_empty):
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return True
            except OSError:  # EIO: pty slave side closed
                data = b""
            if not data:
                return False
            if not client_gone:
                with contextlib.suppress(OSError):
                    send(conn, lock, outs[fd], data)
            if not until_empty:
                return True

    exited = False
    while not exited:
        wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
        if pidfd is None:
            wait_s = 0.01 if wait_s is None else min(wait_s, 0.01)
            if proc.poll() is not None:
                break
        events = sel.select(wait_s)
        if not events and deadline is not None and time.monotonic() >= deadline:
            timed_out = True
            kill_group()
            continue
        for key, _ in events:
            if key.data == "exit":
                exited = True
            elif key.data == "out":
                if not pump(key.fd, False):
                    sel.unregister(key.fd)
            elif key.data == "conn":
                typ, payload = recv(conn)
                if typ is None:
                    # The client went away (worker restart). Keep the command running under
                    # its timeout, like a detached job; output is dropped.
                    client_gone = True
                    sel.unregister(conn)
                elif typ == b"K":
                    kill_group()
                elif typ == b"I" and master is not None:
                    os.set_blocking(master, True)
                    os.write(master, payload)
                    os.set_blocking(master, False)
                elif typ == b"R" and master is not None:
                    import fcntl
                    import termios

                    size = json.loads(payload)
                    winsize = struct.pack("HHHH", size["rows"], size["cols"], 0, 0)
                    fcntl.ioctl(master, termios.TIOCSWINSZ, winsize)
                    # Set on the terminal side too: gVisor does not always carry a master's
                    # window size over to the terminal the program reads it from.
                    with contextlib.suppress(OSError):
                        tty = os.open(tty_name, os.O_RDWR | os.O_NOCTTY)
                        try:
                            fcntl.ioctl(tty, termios.TIOCSWINSZ, winsize)
                        finally:
                            os.close(tty)
                    os.killpg(proc.pid, signal.SIGWINCH)
    rc = proc.wait()
    if pidfd is not None:
        os.close(pidfd)
        sel.unregister(pidfd)
    if not client_gone:
        sel.unregister(conn)
    # Drain what the command wrote. Usually EOF comes at once (no writer is left); pipes still
    # held by background processes get a short grace (gVisor may deliver the exit before the
    # last write is readable) and are then handed to a drainer thread.
    grace_end = time.monotonic() + 0.05
    while sel.get_map():
        events = sel.select(max(0.0, grace_end - time.monotonic()))
        if not events:
            break
        for key, _ in events:
            if not pump(key.fd, True):
                sel.unregister(key.fd)
    lingering = list(sel.get_map())
    sel.close()
    if master is not None:
        os.close(master)
        lingering = []
    exit_code = 128 - rc if rc < 0 else rc
    if not client_gone:
        with contextlib.suppress(OSError):
            send(conn, lock, b"X", jdump({"exit_code": exit_code, "timed_out": timed_out}))
    if lingering:
        # Hand the pipe ends to a drainer; detach them from the Popen objects first.
        for f in (proc.stdout, proc.stderr):
            if f is not None and f.fileno() in lingering:
                os.set_blocking(f.fileno(), True)
        keep = [os.dup(fd) for fd in lingering]
        try:
            threading.Thread(target=drain_forever, args=(keep,), daemon=True).start()
        except RuntimeError:
            for fd in keep:
                os.close(fd)
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


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


class Contained:
    """A command given secrets, run by a reaper of its own (see ``run_reaper``); quacks like
    the parts of ``subprocess.Popen`` that ``op_exec`` uses."""

    def __init__(self, shim, env, cwd, stdio, service):
        ours, theirs = socket.socketpair()
        self.stdout = self.stderr = None
        if stdio["stdout"] == subprocess.PIPE:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            null = os.open(os.devnull, os.O_RDWR)
            fds, mine = [null, out_w, err_w], [null, out_w, err_w]
            self.stdout, self.stderr = os.fdopen(out_r, "rb", 0), os.fdopen(err_r, "rb", 0)
        else:
            fds, mine = [stdio["stdin"]] * 3, []
        try:
            with LAUNCHER_LOCK:
                socket.send_fds(LAUNCHER, [b"run"], [*fds, theirs.fileno()])
        finally:
            theirs.close()
            for fd in mine:
                os.close(fd)
        self._ctl = ours
        # The request goes over the command's own stream (no datagram size limit on env).
        with contextlib.suppress(OSError):  # no reaper (fork failed): its reply says why
            ours.sendall(jdump({"argv": shim, "env": env, "cwd": cwd, "service": service}) + b"\n")
        self._lines = ours.makefile("rb")
        reply = self._read()
        if "pid" not in reply:
            code = getattr(errno, reply.get("errno", ""), errno.EPERM)
            raise OSError(code, reply.get("message", "the reaper could not start the command"))
        self.pid = reply["pid"]
        self.returncode = None

    def _read(self):
        line = self._lines.readline()
        return json.loads(line) if line else {"exit": -9}

    def exit_fd(self):
        return os.dup(self._ctl.fileno())

    def poll(self):
        import select

        if self.returncode is None and select.select([self._ctl], [], [], 0)[0]:
            self.wait()
        return self.returncode

    def wait(self):
        if self.returncode is None:
            self.returncode = self._read().get("exit", -9)
            self._lines.close()
            self._ctl.close()
        return self.returncode


def start_launcher():
    """Fork the launcher while the init is still single-threaded and outside any Landlock
    domain: reapers forked from it give each contained command a domain of its own, which
    the commands the init starts itself (all in the init's domain) cannot reach."""
    global LAUNCHER
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        ours.close()
        try:
            launcher_loop(theirs)
        finally:
            os._exit(0)
    theirs.close()
    LAUNCHER = ours


def launcher_loop(sock):
    os.closerange(3, sock.fileno())  # the listening socket above all
    os.closerange(sock.fileno() + 1, 1024)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reapers are reaped by the kernel
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 16, 8)
        if not msg:
            return
        try:
            pid = os.fork()
        except OSError:
            pid = None
        if pid == 0:
            sock.close()
            try:
                run_reaper(fds)
            finally:
                os._exit(0)
        if pid is None:
            with contextlib.suppress(OSError):
                os.write(fds[-1], jdump({"errno": "EAGAIN", "message": "no slots"}) + b"\n")
        for fd in fds:
            os.close(fd)


def run_reaper(fds):
    """Start one contained command and end everything it leaves when it returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    *stdio, ctl_fd = fds
    ctl = socket.socket(fileno=ctl_fd)
    with ctl.makefile("rb") as lines:
        req = json.loads(lines.readline())
    # Orphans of the command (double forks, setsid daemons) become our children, not the
    # init's: nothing it starts can leave the tree we end. gVisor (this build) allows a child
    # subreaper only as pid 1; there the tree is marked instead, with a supplementary group of
    # its own that no process in it can drop (that needs CAP_SETGID).
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        marker = None
    except OSError:
        marker = MARKER_GID_BASE + os.getpid()
    user = workload_user()
    if marker is not None and user:
        user["extra_groups"] = [marker]

    def own_domain():  # runs in the child, between fork and exec (we are single-threaded)
        enter_own_domain()

    try:
        proc = subprocess.Popen(
            req["argv"],
            env=req["env"],
            cwd=req["cwd"],
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            start_new_session=True,
            preexec_fn=own_domain,
            **user,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        name = errno.errorcode.get(getattr(exc, "errno", 0) or 0, "EPERM")
        ctl.sendall(jdump({"errno": name, "message": str(exc)}) + b"\n")
        return
    for fd in set(stdio):
        os.close(fd)
    service = bool(req.get("service"))
    req.clear()  # drop the secrets from our memory
    ctl.sendall(jdump({"pid": proc.pid}) + b"\n")
    rc = proc.wait()
    if service:
        pass
    elif marker is None:
        end_tree(proc.pid)
    else:
        end_marked(marker)
    with contextlib.suppress(OSError):
        ctl.sendall(jdump({"exit": rc}) + b"\n")
    ctl.close()
    # A service's daemons stay; we stay their reaper (and reap them) until they are all gone.
    with contextlib.suppress(ChildProcessError):
        while True:
            os.wait()


def end_tree(pid):
    """SIGKILL every descendant. As child subreaper we inherit each killed process's children,
    so kill what is left until no child remains."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    me = os.getpid()
    while True:
        for child in children_of(me):
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


MARKER_GID_BASE = 1_000_000_000


def end_marked(gid):
    """SIGKILL every live process carrying the supplementary group ``gid`` until none is left."""
    while True:
        marked = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as fh:
                    fields = dict(ln.split(":", 1) for ln in fh.read().splitlines() if ":" in ln)
            except (OSError, ValueError):
                continue
            if str(gid) in fields.get("Groups", "").split() and "Z" not in fields.get("State", ""):
                marked.append(int(entry))
        if not marked:
            return
        for pid in marked:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        pass
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return kids


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


def op_ping(conn, lock, req):
    send(conn, lock, b"J", jdump({"ok": True, "pid": os.getpid(), "started": STARTED}))


def op_connect(conn, lock, req):
    """A byte stream to a TCP port on the sandbox's own loopback (the live preview's door):
    reply ok, then relay raw bytes both ways until either side closes."""
    upstream = socket.create_connection(
        ("127.0.0.1", int(req["port"])), timeout=req.get("timeout") or 10
    )
    upstream.settimeout(None)
    send(conn, lock, b"J", jdump({"ok": True}))
    relay(conn, upstream)


OPS = {
    "exec": op_exec,
    "read": op_read,
    "write": op_write,
    "list": op_list,
    "ping": op_ping,
    "connect": op_connect,
}


def handle(conn):
    lock = threading.Lock()
    try:
        typ, payload = recv(conn)
        if typ != b"J":
            return
        req = json.loads(payload)
        try:
            OPS[req["op"]](conn, lock, req)
        except Escape as exc:
            send(conn, lock, b"J", jdump({"ok": False, "error": "escape", "message": str(exc)}))
        except FileNotFoundError as exc:
            send(conn, lock, b"J", jdump({"ok": False, "error": "notfound", "message": str(exc)}))
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "oserror")
            send(conn, lock, b"J", jdump({"ok": False, "error": name, "message": str(exc)}))
    except Exception:  # noqa: S110 - one bad request must never take the sandbox down
        pass
    finally:
        conn.close()


def relay(a, b):
    """Copy bytes both ways between two sockets until either side closes."""
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    try:
        while True:
            for key, _ in sel.select():
                data = key.fileobj.recv(65536)
                if not data:
                    return
                key.data.sendall(data)
    except OSError:
        pass
    finally:
        sel.close()
        a.close()
        b.close()


def egress_forwarder(port, proxy_path):
    """Inside the sandbox's own netns: 127.0.0.1:port -> the host's policy proxy socket.

    The sandbox has no route out; this is the only door, and the policy is enforced on the
    other side of it, by the host.
    """
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(64)
    while True:
        client, _ = lsock.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(proxy_path)
        except OSError:
            client.close()
            upstream.close()
            continue
        threading.Thread(target=relay, args=(client, upstream), daemon=True).start()


def main():
    global STARTED
    STARTED = time.time()
    CONFIG.update(json.loads(sys.stdin.buffer.readline()))
    os.close(0)
    # Requests carry secrets: no ptrace, /proc/<pid>/mem or environ access to this process
    # for anyone without CAP_SYS_PTRACE, even with the same uid.
    prctl(PR_SET_DUMPABLE, 0)
    if CONFIG.get("seccomp"):  # gVisor: bubblewrap loads it with --seccomp instead
        import base64

        install_seccomp(base64.b64decode(CONFIG["seccomp"]))
    for name, value in (CONFIG.get("rlimits") or {}).items():
        import resource

        res = getattr(resource, name)
        resource.setrlimit(res, (value, value))
    if CONFIG.get("listen_fd") is not None:
        lsock = socket.socket(fileno=CONFIG["listen_fd"])
    else:
        # Bind under a temporary name and rename once listening: the host treats the
        # socket's appearance as "ready".
        path = CONFIG["listen_path"]
        tmp = path + ".tmp"
        for p in (path, tmp):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(tmp)
        os.chmod(tmp, 0o600)  # the host (root) connects; the workload may not
        lsock.listen(128)
        os.rename(tmp, path)
    start_launcher()
    enter_own_domain()  # every command started from here on shares this domain
    if CONFIG.get("egress_port"):
        threading.Thread(
            target=egress_forwarder,
            args=(CONFIG["egress_port"], CONFIG["egress_socket"]),
            daemon=True,
        ).start()
    lifetime = CONFIG.get("lifetime_seconds")
    if lifetime:
        threading.Timer(lifetime, shutdown).start()
    signal.signal(signal.SIGTERM, lambda *_: shutdown())
    try:
        serve(lsock)
    finally:
        shutdown()


def shutdown():
    """End the sandbox: kill every other process, then exit.

    bubblewrap's pid 1 only exits once it has no children left, so exiting alone would leave
    daemons running in a sandbox nobody can reach any more.
    """
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)  # everything we may signal in our pid namespace
    os._exit(0)


def serve(lsock):
    while True:
        try:
            conn, _ = lsock.accept()
        except InterruptedError:
            continue
        try:
            threading.Thread(target=handle, args=(conn,), daemon=True).start()
        except RuntimeError:
            # The sandbox is at its process limit (threads count too). Refuse this request
            # but stay alive: the init dying would kill the whole sandbox.
            refuse(conn)


def refuse(conn):
    try:
        conn.settimeout(1.0)
        recv(conn)
        send(
            conn,
            threading.Lock(),
            b"J",
            jdump({"ok": False, "error": "spawn", "errno": "EAGAIN", "message": "no slots"}),
        )
    except OSError:
        pass
    conn.close()


STARTED = 0.0

if __name__ == "__main__":
    main()
