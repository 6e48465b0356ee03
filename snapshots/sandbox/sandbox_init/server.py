"""The command server's main loop: it reads its config, confines itself, listens on its socket and
serves each request in a thread of its own (``OPS``); opens the sandbox's doors (``doors``); the
sandbox's end.
"""

import contextlib
import errno
import json
import os
import signal
import socket
import sys
import threading
import time

from .commands import op_exec
from .confine import CONFIG, PR_SET_DUMPABLE, enter_own_domain, install_seccomp, prctl
from .doors import open_doors, relay
from .files import Escape, op_list, op_read, op_write
from .frames import jdump, recv, send
from .reaper import start_launcher

STARTED = 0.0


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
    start_launcher()  # its thread stays outside the domain below (a domain is per thread)
    # This thread, every thread it starts from here on and every command they start share
    # this domain.
    enter_own_domain()
    open_doors(CONFIG)
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
