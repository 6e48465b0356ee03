"""The sandbox's doors: byte streams between a port on the sandbox's own loopback and something
on the other side of its walls.

* In: the host asks the init for a stream to a port inside (``server.op_connect``, the live
  preview's door), relayed by ``relay``.
* Out: ``forward`` listens on ``127.0.0.1:port`` inside the sandbox's network namespace and
  carries each connection to a unix socket the host bound into the sandbox: the allowlist
  proxy (``egress.py``) and the model gateway. The sandbox has no route out; the policy is
  enforced on the other side of the socket, by the host. The socket path is fixed by the host's
  config, so the door reaches that one socket and nothing else.
"""

import contextlib
import json
import queue
import selectors
import socket
import threading
import time

# What a runtime shows when the gateway is down: both providers' error shapes in one body
# (Anthropic reads ``type``/``error.type``/``error.message``, OpenAI ``error.message``).
GATEWAY_DOWN = json.dumps(
    {
        "type": "error",
        "error": {
            "type": "gateway_unavailable",
            "code": "gateway_unavailable",
            "message": "The model gateway is not running (nothing answers on its socket). "
            "Ask the platform's operator to start it; `manage.py inspect doctor` shows its "
            "state.",
        },
    }
).encode()
HEAD_LIMIT = 65536
DRAIN_LIMIT = 16 * 1024 * 1024


def relay(a, b, half_close=False):
    """Copy bytes both ways between two sockets until either side closes or, with
    ``half_close``, until both have: a side that shuts down its writing half is passed on as
    the same half-close, so a request sent that way still gets its answer."""
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    open_sides = 2 if half_close else 1
    try:
        while open_sides:
            for key, _ in sel.select():
                data = key.fileobj.recv(65536)
                if data:
                    key.data.sendall(data)
                    continue
                sel.unregister(key.fileobj)
                open_sides -= 1
                if not open_sides:
                    break
                key.data.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        sel.close()
        a.close()
        b.close()


def refuse_quietly(client):
    """The egress proxy is gone (its sandbox is ending): close, as a refused connection."""
    client.close()


def answer_gateway_down(client):
    """The gateway's socket is missing or nobody listens on it: read the request's head,
    answer 503 with a JSON body the agent CLIs display, then let the client finish sending
    (closing on unread data would reset the connection before the client reads the answer)."""
    try:
        client.settimeout(2)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
            chunk = client.recv(4096)
            if not chunk:
                break
            head += chunk
        client.sendall(
            b"HTTP/1.1 503 Service Unavailable\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (len(GATEWAY_DOWN), GATEWAY_DOWN)
        )
        client.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + 1
        drained = 0
        while drained < DRAIN_LIMIT and time.monotonic() < deadline:
            chunk = client.recv(65536)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:
        pass
    finally:
        client.close()


def carry(client, path, refused):
    # Each write from the other side goes out at once: with Nagle's algorithm a small write
    # (a streamed token) waits for the client's delayed ACK of the one before, up to 40 ms.
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        upstream.close()
        refused(client)
        return
    relay(client, upstream, half_close=True)


class Carriers:
    """The threads that carry connections: one per open connection, and up to ``KEEP`` of them
    kept waiting when their connection ends. Starting a thread costs ~0.9 ms under gVisor's
    ptrace platform, a third of what a new connection through the door cost without them."""

    KEEP = 4

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.idle = 0

    def submit(self, job):
        with self.lock:
            waiting = self.idle > 0
            if waiting:
                self.idle -= 1  # that thread is promised this job
        if waiting:
            self.jobs.put(job)
        else:
            threading.Thread(target=self.work, args=(job,), daemon=True).start()

    def work(self, job):
        while True:
            with contextlib.suppress(Exception):  # one connection must not end the carrier
                job[0](*job[1:])
            with self.lock:
                if self.idle >= self.KEEP:
                    return
                self.idle += 1
            job = self.jobs.get()


def forward(lsock, path, refused):
    """Inside the sandbox's own netns: each connection accepted on ``lsock`` -> the unix socket
    ``path``, each carried by a thread of its own; ``refused`` answers when nothing listens
    there."""
    carriers = Carriers()
    while True:
        try:
            client, _ = lsock.accept()
        except OSError:
            continue
        try:
            carriers.submit((carry, client, path, refused))
        except RuntimeError:
            client.close()  # the sandbox is at its process limit: refuse, stay up


def open_doors(config):
    """Start the forwarders ``config`` asks for. Each port is bound here, before any command
    runs, so no workload can take it first."""
    doors = (
        ("egress_port", "egress_socket", refuse_quietly),
        ("gateway_port", "gateway_socket", answer_gateway_down),
    )
    for port_key, path_key, refused in doors:
        if not config.get(port_key):
            continue
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", config[port_key]))
        lsock.listen(128)
        threading.Thread(
            target=forward, args=(lsock, config[path_key], refused), daemon=True
        ).start()
