"""Running a command (``exec`` requests, PTYs among them): the shim every command goes through, its
environment, streaming its output to the client, its timeout, kill and resize.
"""

import contextlib
import errno
import json
import os
import posixpath
import selectors
import signal
import struct
import subprocess
import threading
import time

from .confine import CONFIG, give_to_workload, workload_user
from .files import WORKSPACE
from .frames import jdump, recv, send
from .reaper import Contained

# Every command goes through this shim: it undoes the OOM protection the host gave to the
# init (so the OOM killer picks the real memory hog) and, for PTYs, makes the terminal the
# controlling tty of the new session, all without preexec_fn (unsafe in a threaded server).
SHIM = 'echo 0 >/proc/self/oom_score_adj 2>/dev/null; {tty}exec "$@"'


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
