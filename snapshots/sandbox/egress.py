"""Allowlist egress: an HTTP/HTTPS proxy on the HOST that only talks to allowed domains.

A sandbox with ``NetworkPolicy(mode="allowlist")`` has no network but its own loopback. Its init
forwards ``127.0.0.1:EGRESS_PORT`` (inside) to a unix socket bound into the sandbox, on whose
other end this proxy runs as a separate host process (so it survives worker restarts and is
killed with the sandbox). Requests: ``CONNECT host:port`` (HTTPS, any TLS client) and absolute
``GET http://host/...`` (plain HTTP). Anything else, or a host not on the list, gets a 403 that
says why. Policy is checked on the host name the client asked for, before any DNS lookup.

Run as a script: ``python egress.py '<json config>'`` with the listening socket inherited.
Stdlib only and self-contained (no project imports) so it can be started with ``-I``.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from snapshots.sandbox.base import NetworkPolicy

EGRESS_PORT = 3128


def start_egress_proxy(
    sock_path: Path,
    policy: NetworkPolicy,
    hosts: Mapping[str, str],
    *,
    uid: int,
    gid: int,
    log_path: Path,
) -> subprocess.Popen[bytes]:
    """Start the proxy process for one sandbox; returns once its socket accepts connections."""
    from snapshots.sandbox.protocol import unix_path

    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name, dirfd = unix_path(sock_path)
    try:
        lsock.bind(name)
    finally:
        if dirfd is not None:
            os.close(dirfd)
    os.chmod(sock_path, 0o666)  # noqa: S103 - the sandbox user connects to it from inside
    lsock.listen(64)
    config = {"domains": list(policy.domains), "hosts": dict(hosts), "fd": lsock.fileno()}
    logf = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    try:
        # The socket is bound before the child starts, so there is nothing to wait for.
        # /usr/bin/python3 and -c: the unprivileged proxy user may not be able to read the
        # worker's own interpreter or source tree (e.g. under /root).
        proc = subprocess.Popen(
            ["/usr/bin/python3", "-I", "-S", "-c", Path(__file__).read_text(), json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            pass_fds=[lsock.fileno()],
            user=uid,
            group=gid,
            extra_groups=[],
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        logf.close()
        lsock.close()
    return proc


# ------------------------------------------------------------------------------------------
# The proxy process itself
# ------------------------------------------------------------------------------------------


def allowed(host: str, domains: list[str]) -> bool:
    host = host.lower().rstrip(".")
    for dom in domains:
        dom = dom.lower().rstrip(".").removeprefix("*.")
        if host == dom or host.endswith("." + dom):
            return True
    return False


def _relay(a: socket.socket, b: socket.socket) -> None:
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    try:
        while True:
            for key, _ in sel.select():
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                if not data:
                    return
                key.data.sendall(data)
    except OSError:
        pass
    finally:
        sel.close()
        a.close()
        b.close()


def _deny(client: socket.socket, host: str, why: str) -> None:
    body = f"inspect sandbox egress policy: {why}: {host}\n".encode()
    client.sendall(
        b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\nX-Inspect-Egress: denied\r\n\r\n".encode()
        + body
    )
    client.close()
    print(f"denied {host}: {why}", flush=True)


def _split_hostport(hostport: str, default_port: int) -> tuple[str, int]:
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = hostport.partition(":")
    return host, int(port) if port else default_port


def _serve(client: socket.socket, config: dict) -> None:
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                client.close()
                return
            head += chunk
            if len(head) > 65536:
                _deny(client, "?", "request header too large")
                return
        header, _, rest = head.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        if method == "CONNECT":
            host, port = _split_hostport(target, 443)
        elif target.startswith("http://"):
            hostport, _, path = target[len("http://") :].partition("/")
            host, port = _split_hostport(hostport, 80)
            lines[0] = f"{method} /{path} {version}"
            # Connection reuse would let a second request go to another host unchecked.
            lines = [ln for ln in lines if not ln.lower().startswith(("proxy-", "connection:"))]
            lines.append("Connection: close")
        else:
            _deny(client, target, "only CONNECT and absolute http:// requests are proxied")
            return
        if not allowed(host, config["domains"]):
            _deny(client, host, "host is not on the allowlist")
            return
        address = config["hosts"].get(host.lower(), host)
        try:
            upstream = socket.create_connection((address, port), timeout=15)
            upstream.settimeout(None)
        except OSError as exc:
            body = f"inspect sandbox egress: cannot reach {host}:{port}: {exc}\n".encode()
            client.sendall(
                b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            client.close()
            return
        print(f"allowed {method} {host}:{port}", flush=True)
        if method == "CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
        else:
            upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + rest)
        _relay(client, upstream)
    except (OSError, ValueError):
        client.close()


def main() -> None:
    config = json.loads(sys.argv[1])
    lsock = socket.socket(fileno=config["fd"])
    while True:
        client, _ = lsock.accept()
        threading.Thread(target=_serve, args=(client, config), daemon=True).start()


if __name__ == "__main__":
    main()
