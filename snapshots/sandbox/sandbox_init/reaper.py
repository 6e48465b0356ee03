"""Contained commands (those given secrets, and services): each is started by a reaper of its own,
forked from the init's launcher thread, which is outside the init's Landlock domain, so the
command gets a Landlock domain of its own, and when it returns the reaper ends every process it
left (unless it is a ``service``).
"""

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import threading
import time

from .confine import PR_SET_CHILD_SUBREAPER, enter_own_domain, prctl, workload_user
from .frames import jdump

LAUNCHER = None  # socket to the launcher process (see start_launcher)
LAUNCHER_LOCK = threading.Lock()


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
    """Start the launcher while the init is still outside any Landlock domain: a thread of the
    init, which keeps no domain when the init then enters its own (a domain is per thread), so
    reapers forked from it give each contained command a domain of its own, which the commands
    the init starts itself (all in the init's domain) cannot reach. A thread, not a forked
    process: an idle sandbox then holds one Python process, not two (bench/density.py)."""
    global LAUNCHER
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    threading.Thread(target=launcher_loop, args=(theirs,), name="launcher", daemon=True).start()
    LAUNCHER = ours


def launcher_loop(sock):
    unreaped = []  # reapers no waiter thread could be started for (at the process limit)
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 16, 8)
        if not msg:
            return
        unreaped = [pid for pid in unreaped if not reaped(pid, os.WNOHANG)]
        try:
            pid = os.fork()  # from this thread: the child is outside the init's domain too
        except OSError:
            pid = None
        if pid == 0:
            close_all_but(fds)  # nothing of the init's (its sockets, other commands' pipes)
            try:
                run_reaper(fds)
            finally:
                os._exit(0)
        if pid is None:
            with contextlib.suppress(OSError):
                os.write(fds[-1], jdump({"errno": "EAGAIN", "message": "no slots"}) + b"\n")
        else:
            try:
                threading.Thread(target=reaped, args=(pid, 0), daemon=True).start()
            except RuntimeError:
                unreaped.append(pid)
        for fd in fds:
            os.close(fd)


def reaped(pid, flags):
    """Reap one reaper (only its own pid: the init's other children are waited for by theirs)."""
    try:
        return os.waitpid(pid, flags)[0] == pid
    except ChildProcessError:
        return True


def close_all_but(keep):
    """Close every fd but ``keep`` (a forked reaper's own) and the init's log (1 and 2): the
    init closed its stdin, so fd 0 is one of its sockets by now."""
    low = 0
    for fd in sorted({*keep, 1, 2}):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def run_reaper(fds):
    """Start one contained command and end everything it leaves when it returns."""
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
