"""Test hosts for the network red-team tests: each is a network namespace the test makes
itself, joined to the host by a veth pair, running a small TCP server.

Nothing here sends traffic off this machine: every address used is routed to one of these
namespaces (a /30 on the veth pair), and each host is torn down after its test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# Answers every connection with a banner naming the host and the first bytes it got (200 at
# most, as an HTTP response if they were a GET), so a test can tell what reached the upstream.
SERVER = r"""
import socket, sys, threading
addr, banner, ports = sys.argv[1], sys.argv[2].encode(), sys.argv[3:]
servers = []
for port in ports:
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, int(port))); srv.listen(16); servers.append(srv)
print("ready", flush=True)
def serve(c):
    c.settimeout(5)
    try:
        data = b""
        try:
            data = c.recv(4096)
        except OSError:
            pass
        body = banner + b" got:" + data[:200]
        if data.startswith(b"GET "):  # speak HTTP to HTTP clients
            body = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        c.sendall(body)
    finally:
        c.close()
def accept(srv):
    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
for srv in servers[1:]:
    threading.Thread(target=accept, args=(srv,), daemon=True).start()
accept(servers[0])
"""


@dataclass
class NetHost:
    name: str
    address: str  # the test host's address, inside its namespace
    host_side: str  # the address of the veth end on this machine
    port: int  # the first of its ports
    banner: str


@contextmanager
def net_host(
    tag: str, network: str, *, port: int, banner: str, more_ports: tuple[int, ...] = ()
) -> Iterator[NetHost]:
    """A namespace ``network``.2 with a TCP server on ``port`` (and ``more_ports``), routed
    from the host via veth.

    ``network`` is the first three octets of a /30, e.g. "10.250.7".
    """
    ns = f"inspect-t{tag}{os.getpid() % 100000}"
    veth_host, veth_ns = f"vh{tag}{os.getpid() % 100000}", f"vn{tag}{os.getpid() % 100000}"
    addr, host_side = f"{network}.2", f"{network}.1"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    ip("netns", "add", ns)
    server = None
    try:
        ip("link", "add", veth_host, "type", "veth", "peer", "name", veth_ns)
        ip("link", "set", veth_ns, "netns", ns)
        ip("addr", "add", f"{host_side}/30", "dev", veth_host)
        ip("link", "set", veth_host, "up")
        ip("-n", ns, "addr", "add", f"{addr}/30", "dev", veth_ns)
        ip("-n", ns, "link", "set", veth_ns, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "route", "add", "default", "via", host_side)
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SERVER, addr, banner]
            + [str(p) for p in (port, *more_ports)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert server.stdout is not None
        assert server.stdout.readline().strip() == b"ready"
        yield NetHost(ns, addr, host_side, port, banner)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", veth_host], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        time.sleep(0.05)


@contextmanager
def banner_server(bind: str, banner: bytes) -> Iterator[int]:
    """A TCP server on this machine, at `bind`, that greets each connection with `banner` and
    closes it: a stand-in for a host service a sandbox must (not) reach. Yields its port."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(banner)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        srv.close()
