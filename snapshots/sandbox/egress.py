"""Allowlist egress: an HTTP/HTTPS proxy on the HOST that only talks to allowed domains.

A sandbox with ``NetworkPolicy(mode="allowlist")`` has no network but its own loopback. Its init
forwards ``127.0.0.1:EGRESS_PORT`` (inside) to a unix socket bound into the sandbox, on whose
other end this proxy runs as a separate host process (so it survives worker restarts and is
killed with the sandbox). Requests: ``CONNECT host:port`` (HTTPS, any TLS client) and absolute
``GET http://host/...`` (plain HTTP). Anything else, or a host not on the list, gets a 403 that
says why. Policy is checked on the host name the client asked for, before any DNS lookup; then:

* only the policy's ports (80 and 443; an operator exception may name others for its address);
* the name is resolved once, and an address on the deny list (loopback, private, CGNAT,
  link-local and metadata, ULA, this machine's own) is refused unless an operator exception
  names it; the proxy connects to the address it checked, so a second lookup cannot rebind it;
* plain HTTP gets ``Host`` set from the allowed name (no domain fronting);
* CONNECT must carry TLS whose ClientHello names the CONNECT host (SNI), checked before a byte
  reaches the upstream.

Every refusal is one ``refused {json}`` line in the proxy's log (``egress.log``).

Run as a script: ``python egress.py '<json config>'`` with the listening socket inherited.
Stdlib only and self-contained (no project imports) so it can be started with ``-I``.
"""

from __future__ import annotations

import ipaddress
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
    from collections.abc import Sequence

    from snapshots.sandbox.base import NetworkPolicy
    from snapshots.sandbox.netns import EgressException, IPNetwork

EGRESS_PORT = 3128
DEFAULT_PORTS = (80, 443)


def start_egress_proxy(
    sock_path: Path,
    policy: NetworkPolicy,
    hosts: Mapping[str, str],
    *,
    uid: int,
    gid: int,
    log_path: Path,
    deny: Sequence[IPNetwork] = (),
    exceptions: Sequence[EgressException] = (),
    ports: Sequence[int] = DEFAULT_PORTS,
) -> subprocess.Popen[bytes]:
    """Start the proxy process for one sandbox; returns once its socket accepts connections.

    ``gid`` is the group the host's egress table confines (see netns.py), a backstop to the
    proxy's own address checks.
    """
    # Not at module top: run as a script (`python -I egress.py`), this module loads stdlib only.
    from snapshots.sandbox.netns import host_addresses
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
    config = {
        "domains": list(policy.domains),
        "hosts": dict(hosts),
        "fd": lsock.fileno(),
        "ports": sorted(set(ports)),
        "deny": [str(n) for n in deny]
        + [f"{a}/{32 if ':' not in a else 128}" for a in host_addresses()],
        "exceptions": [
            {"name": e.name, "network": str(e.network), "ports": [list(r) for r in e.ports]}
            for e in exceptions
        ],
    }
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


def _log_refusal(host: str, port: int | None, why: str, address: str | None = None) -> None:
    record = {"host": host, "port": port, "address": address, "reason": why}
    print("refused " + json.dumps(record), flush=True)


def _deny(
    client: socket.socket, host: str, why: str, port: int | None = None, address: str | None = None
) -> None:
    body = f"inspect sandbox egress policy: {why}: {host}\n".encode()
    client.sendall(
        b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\nX-Inspect-Egress: denied\r\n\r\n".encode()
        + body
    )
    client.close()
    _log_refusal(host, port, why, address)


def _split_hostport(hostport: str, default_port: int) -> tuple[str, int]:
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = hostport.partition(":")
    return host, int(port) if port else default_port


def _exception_for(address: str, port: int, config: dict) -> dict | None:
    ip = ipaddress.ip_address(address)
    for exc in config["exceptions"]:
        net = ipaddress.ip_network(exc["network"])
        in_net = ip.version == net.version and ip in net
        if in_net and (not exc["ports"] or any(lo <= port <= hi for lo, hi in exc["ports"])):
            return exc
    return None


def _denied_address(address: str, config: dict) -> bool:
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    # Not ``is_private``: it counts the documentation ranges (TEST-NET) as private too. The
    # deny list names the private ranges; these are refused whatever it says.
    if ip.is_loopback or ip.is_link_local or ip.is_multicast:
        return True
    if ip.is_unspecified or ip.is_reserved:
        return True
    for net in config["deny"]:
        n = ipaddress.ip_network(net)
        if ip.version == n.version and ip in n:
            return True
    return False


def resolve_checked(host: str, port: int, config: dict) -> tuple[str | None, str]:
    """Resolve ``host`` once; returns (an address it is fine to connect to, "") or
    (None, why not). The caller connects to that very address: no second lookup."""
    port_refused = f"port {port} is not allowed (allowed: {config['ports']})"
    named = any(lo <= port <= hi for e in config["exceptions"] for lo, hi in e["ports"])
    if port not in config["ports"] and not named:
        return None, port_refused
    override = config["hosts"].get(host.lower())
    try:
        if override:
            addresses = [override]
        else:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    except (OSError, UnicodeError) as exc:
        return None, f"cannot resolve: {exc}"
    refused = []
    for address in addresses:
        if _exception_for(address, port, config):
            return address, ""
        if port not in config["ports"]:
            return None, port_refused
        if _denied_address(address, config):
            refused.append(address)
            continue
        return address, ""
    return None, f"resolves to {', '.join(refused)}, a loopback, private or link-local address"


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ValueError("connection closed before the TLS ClientHello was complete")
        buf += chunk
    return buf


def read_client_hello(sock: socket.socket, first: bytes = b"") -> tuple[bytes, str | None]:
    """Read the TLS ClientHello (possibly over several records); returns the raw bytes read and
    its SNI host name (None if it names none). ValueError if it is not TLS."""
    raw, handshake = first, b""
    need: int | None = None
    # Records: type(1) version(2) length(2) payload; a ClientHello may span several.
    pos = 0
    while need is None or len(handshake) < need:
        while len(raw) < pos + 5:
            raw += _recv_exact(sock, pos + 5 - len(raw))
        ctype, length = raw[pos], int.from_bytes(raw[pos + 3 : pos + 5], "big")
        if ctype != 22 or length == 0 or length > 18432:
            raise ValueError("not a TLS handshake")
        while len(raw) < pos + 5 + length:
            raw += _recv_exact(sock, pos + 5 + length - len(raw))
        handshake += raw[pos + 5 : pos + 5 + length]
        pos += 5 + length
        if need is None and len(handshake) >= 4:
            if handshake[0] != 1:
                raise ValueError("not a TLS ClientHello")
            need = 4 + int.from_bytes(handshake[1:4], "big")
            if need > 65536:
                raise ValueError("TLS ClientHello too large")
    return raw, _sni(handshake[4:need])


def _sni(hello: bytes) -> str | None:
    p = 2 + 32  # client_version, random
    p += 1 + hello[p]  # session id
    p += 2 + int.from_bytes(hello[p : p + 2], "big")  # cipher suites
    p += 1 + hello[p]  # compression methods
    if p + 2 > len(hello):
        return None
    end = p + 2 + int.from_bytes(hello[p : p + 2], "big")
    p += 2
    while p + 4 <= end:
        etype, elen = (
            int.from_bytes(hello[p : p + 2], "big"),
            int.from_bytes(hello[p + 2 : p + 4], "big"),
        )
        body = hello[p + 4 : p + 4 + elen]
        p += 4 + elen
        if etype != 0:
            continue
        q = 2  # server_name_list length
        while q + 3 <= len(body):
            ntype, nlen = body[q], int.from_bytes(body[q + 1 : q + 3], "big")
            if ntype == 0:
                return body[q + 3 : q + 3 + nlen].decode("ascii", "replace")
            q += 3 + nlen
    return None


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
            # Connection reuse would let a second request go to another host unchecked, and
            # the Host header is the allowed name's, whatever the client sent (no fronting).
            lines = [
                ln for ln in lines if not ln.lower().startswith(("proxy-", "connection:", "host:"))
            ]
            lines.insert(1, f"Host: {host}" + ("" if port == 80 else f":{port}"))
            lines.append("Connection: close")
        else:
            _deny(client, target, "only CONNECT and absolute http:// requests are proxied")
            return
        if not allowed(host, config["domains"]):
            _deny(client, host, "host is not on the allowlist", port)
            return
        address, why = resolve_checked(host, port, config)
        if address is None:
            _deny(client, host, why, port)
            return
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
        if method == "CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            client.settimeout(15)
            try:
                hello, sni = read_client_hello(client, rest)
            except (ValueError, OSError) as exc:
                upstream.close()
                client.close()
                _log_refusal(host, port, f"CONNECT must carry TLS: {exc}", address)
                return
            client.settimeout(None)
            if (sni or "").lower().rstrip(".") != host.lower().rstrip("."):
                upstream.close()
                client.close()
                _log_refusal(
                    host, port, f"TLS server name {sni!r} is not the CONNECT host", address
                )
                return
            print(f"allowed {method} {host}:{port} ({address})", flush=True)
            upstream.sendall(hello)
        else:
            print(f"allowed {method} {host}:{port} ({address})", flush=True)
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
