"""Sandbox networking on the local backend: one network namespace per sandbox, whatever the mode.

* ``none`` and ``allowlist``: the namespace has only its own loopback (the allowlist proxy is
  reached through a unix socket, see ``egress.py``).
* ``open``: user-mode NAT by ``slirp4netns`` (``--disable-host-loopback``): the sandbox gets a
  tap device, and its connections are made on the host by the slirp4netns process. That process
  runs under a dedicated group id (``nat_gid``), and a host nftables table refuses every socket of
  that group the deny list: this machine's own addresses (``fib daddr type local``), loopback,
  RFC 1918, CGNAT, link-local (with the cloud metadata address), IPv6 ULA and link-local, plus
  whatever the operator adds. Operator exceptions (``EgressException``) are accepted before it.
  The workload cannot undo any of it: the table lives in the host's namespace, where the
  workload has no capability, and gVisor sandboxes never see the host's kernel at all.

The allowlist proxy runs under the same group, so the same table backs its own address checks.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import selectors
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Never reachable from a sandbox unless the operator names an exception.
DEFAULT_DENY: tuple[str, ...] = (
    "0.0.0.0/8",
    "127.0.0.0/8",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",  # CGNAT
    "169.254.0.0/16",  # link-local, incl. the cloud metadata address 169.254.169.254
    "224.0.0.0/4",  # multicast
    "255.255.255.255/32",
    "::/128",
    "::1/128",
    "::ffff:0:0/96",  # IPv4-mapped: the IPv4 rules above decide
    "fc00::/7",  # ULA
    "fe80::/10",  # link-local
    "ff00::/8",  # multicast
)
# slirp4netns' fixed layout (its default --cidr): the sandbox is .100, DNS is .3.
SLIRP_DNS = "10.0.2.3"
TAP = "tap0"


@dataclass(frozen=True)
class EgressException:
    """A private address the operator lets sandboxes reach (e.g. a package mirror)."""

    name: str
    network: IPNetwork
    ports: tuple[tuple[int, int], ...] = ()  # inclusive ranges; empty = every port

    def allows(self, address: str, port: int) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if ip.version != self.network.version or ip not in self.network:
            return False
        return not self.ports or any(lo <= port <= hi for lo, hi in self.ports)

    def describe(self) -> str:
        ports = ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ports)
        return f"{self.name}: {self.network}" + (f" port {ports}" if ports else " (any port)")

    def spec(self) -> str:
        """Back to the setting's syntax (how it is handed to the proxy process)."""
        net = f"[{self.network}]" if self.network.version == 6 else str(self.network)
        ports = "+".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ports)
        return f"{self.name}={net}" + (f":{ports}" if ports else "")


_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def parse_host_overrides(raw: str) -> dict[str, str]:
    """Parse ``name=ADDRESS`` entries separated by commas: names the allowlist proxy resolves
    to the given address instead of asking DNS (split DNS, e.g. an in-house model gateway).
    Raises ValueError saying which entry is wrong and why."""
    out = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        name, sep, address = (part.strip() for part in entry.partition("="))
        if not sep or not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", name):
            raise ValueError(f"{entry!r}: expected host.name=ADDRESS")
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"{entry!r}: {address!r} is not an IP address") from None
        out[name.lower()] = address
    return out


def parse_exceptions(raw: str) -> tuple[EgressException, ...]:
    """Parse ``name=ADDRESS[/PREFIX][:PORTS]`` entries separated by commas.

    PORTS is ``443``, ``80+443`` or ``8000-8100``; an IPv6 address is written in brackets,
    ``mirror=[fd00::5]/128:443``. Raises ValueError saying which entry is wrong and why.
    """
    out = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        name, sep, rest = entry.partition("=")
        if not sep or not _NAME_RE.match(name.strip()):
            raise ValueError(f"{entry!r}: expected name=ADDRESS[/PREFIX][:PORTS]")
        rest = rest.strip()
        ports_spec = ""
        if rest.startswith("["):
            addr, _, tail = rest[1:].partition("]")
            prefix, _, ports_spec = tail.partition(":")
            addr += prefix
        else:
            addr, _, ports_spec = rest.partition(":")
        try:
            network = ipaddress.ip_network(addr, strict=False)
        except ValueError:
            raise ValueError(f"{entry!r}: {addr!r} is not an address or network") from None
        ports: list[tuple[int, int]] = []
        for part in filter(None, ports_spec.split("+")):
            lo, _, hi = part.partition("-")
            try:
                rng = (int(lo), int(hi or lo))
            except ValueError:
                raise ValueError(f"{entry!r}: {part!r} is not a port or port range") from None
            if not (0 < rng[0] <= rng[1] < 65536):
                raise ValueError(f"{entry!r}: {part!r} is not a port or port range")
            ports.append(rng)
        if ports_spec and not ports:
            raise ValueError(f"{entry!r}: empty port list")
        out.append(EgressException(name.strip(), network, tuple(ports)))
    return tuple(out)


def parse_networks(raw: str) -> tuple[IPNetwork, ...]:
    """Comma-separated addresses or CIDR networks; ValueError names the bad one."""
    out = []
    for item in (e.strip() for e in raw.split(",")):
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an address or network") from None
    return tuple(out)


def deny_list(extra: Iterable[IPNetwork] = ()) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(n) for n in DEFAULT_DENY) + tuple(extra)


def host_resolvers(path: str = "/etc/resolv.conf") -> list[str]:
    """The host's name servers: slirp4netns forwards the sandbox's DNS queries to them."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                with contextlib.suppress(ValueError):
                    out.append(str(ipaddress.ip_address(parts[1].split("%")[0])))
    return out


def host_addresses() -> list[str]:
    """This machine's own addresses (the proxy refuses them; for NAT, nftables' fib does)."""
    proc = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True)
    out = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[2] in ("inet", "inet6"):
            out.append(parts[3].split("/")[0])
    return out


def nat_problem() -> str | None:
    """None if ``open`` sandboxes can get NAT here, else the missing feature, by name."""
    if not shutil.which("slirp4netns"):
        return "slirp4netns is not installed (Debian package slirp4netns)"
    if not shutil.which("nft"):
        return "nft is not installed (Debian package nftables): it enforces the deny list"
    if not Path("/dev/net/tun").exists():
        return "/dev/net/tun is missing (kernel TUN/TAP support)"
    if os.geteuid() != 0:
        return "NAT setup needs root (nftables table, tap device in the sandbox's namespace)"
    return None


def _nft_set(items: Sequence[str]) -> str:
    return "{ " + ", ".join(items) + " }"


def firewall_ruleset(
    gid: int,
    deny: Sequence[IPNetwork],
    exceptions: Sequence[EgressException],
    resolvers: Sequence[str],
) -> str:
    """The nftables table that confines sockets of group ``gid`` (NAT and proxy processes)."""
    table = f"inspect_egress_{gid}"
    rules: list[str] = []
    for addr in resolvers:
        fam = "ip6" if ":" in addr else "ip"
        rules.append(f"{fam} daddr {addr} meta l4proto {{ tcp, udp }} th dport 53 accept")
    for exc in exceptions:
        fam = "ip6" if exc.network.version == 6 else "ip"
        match = f"{fam} daddr {exc.network}"
        if exc.ports:
            ports = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in exc.ports]
            match += f" meta l4proto {{ tcp, udp }} th dport {_nft_set(ports)}"
        rules.append(f"{match} accept comment {_quote(exc.name)}")
    reject = "reject with icmpx type admin-prohibited"
    rules.append(f"fib daddr type local {reject}")
    for fam, version in (("ip", 4), ("ip6", 6)):
        nets = [str(n) for n in deny if n.version == version]
        if nets:
            rules.append(f"{fam} daddr {_nft_set(nets)} {reject}")
    body = "\n".join(f"    {r}" for r in rules)
    # A positive match and a jump, not "skgid != gid accept": a packet the kernel sends with no
    # socket (the RST answering a closed port, ICMP errors) matches no skgid, so it must fall
    # through to accept; under the negated form it reached the rejects and every connection
    # to a closed local port hung until its timeout instead of being refused.
    # Declaring then deleting makes the load idempotent and atomic (one nft transaction).
    return (
        f"table inet {table} {{}}\ndelete table inet {table}\n"
        f"table inet {table} {{\n  chain confine {{\n{body}\n  }}\n"
        f"  chain output {{\n"
        f"    type filter hook output priority filter; policy accept;\n"
        f"    meta skgid {gid} jump confine\n  }}\n}}\n"
    )


def _quote(text: str) -> str:
    return '"' + re.sub(r"[^A-Za-z0-9_.=/:+ -]", "_", text) + '"'


def install_firewall(
    gid: int,
    deny: Sequence[IPNetwork],
    exceptions: Sequence[EgressException],
    resolvers: Sequence[str] | None = None,
) -> None:
    """Load (or replace) the host table for ``gid``. Raises RuntimeError with nft's message."""
    ruleset = firewall_ruleset(
        gid, deny, exceptions, host_resolvers() if resolvers is None else resolvers
    )
    proc = subprocess.run(["nft", "-f", "-"], input=ruleset, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nft could not load the egress deny list: {proc.stderr.strip()}")


def start_nat(
    *,
    gid: int,
    log_path: Path,
    pid: int | None = None,
    netns_path: str | None = None,
    timeout: float = 10.0,
) -> subprocess.Popen[bytes]:
    """Attach slirp4netns to a sandbox's namespace (by ``pid`` or ``netns_path``).

    Returns once the tap device is configured. It runs as root (opening the tap inside another
    user's namespace needs it) but with group ``gid``, the group the host table confines, and
    drops its capabilities and filters its syscalls once set up. Raises RuntimeError.
    """
    ready_r, ready_w = os.pipe()
    argv = [
        "slirp4netns",
        "--configure",
        "--disable-host-loopback",
        "--mtu=65520",
        "--enable-sandbox",
        "--enable-seccomp",
        f"--ready-fd={ready_w}",
    ]
    # By path, never by pid: with a pid it would also join the sandbox's user namespace,
    # where it is nobody and cannot open /dev/net/tun.
    argv += ["--netns-type=path", netns_path or f"/proc/{pid}/ns/net", TAP]
    logf = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            pass_fds=[ready_w],
            group=gid,
            extra_groups=[],
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        logf.close()
        os.close(ready_w)
    try:
        sel = selectors.DefaultSelector()
        sel.register(ready_r, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while True:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                proc.kill()
                raise RuntimeError(f"slirp4netns did not get ready within {timeout:.0f} s")
            if os.read(ready_r, 1):
                break
            proc.wait(timeout=5)  # EOF: it exited
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"slirp4netns failed: {' | '.join(tail)}")
        sel.close()
    finally:
        os.close(ready_r)
    return proc


def hold_netns(timeout: float = 5.0) -> subprocess.Popen[bytes]:
    """A process that holds a new, empty network namespace (gVisor's ``open`` runs in it).

    Its namespace is named by ``/proc/<pid>/ns/net``; it dies with the holder, so nothing is
    left behind when a sandbox is killed. Raises RuntimeError.
    """
    proc = subprocess.Popen(
        ["unshare", "--net", "--", "/bin/sleep", "infinity"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    ours = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + timeout
    while True:
        try:
            # After unshare() the holder exec()s sleep: same pid, new namespace.
            if os.readlink(f"/proc/{proc.pid}/ns/net") != ours:
                return proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise RuntimeError(f"cannot create a network namespace: {err or 'timed out'}")
        time.sleep(0.001)


def resolv_conf() -> str:
    return f"nameserver {SLIRP_DNS}\n"
