"""A local sandbox's egress, set up on the host whichever runtime runs it (``bwrap.py``,
``runsc.py``): the host's deny-list table, the allowlist proxy (``egress.py``) and the NAT of
an ``open`` sandbox (``netns.py``). The backend (``local.py``) records the processes started
here, so they end with the sandbox.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from snapshots.sandbox import netns
from snapshots.sandbox.base import NetworkPolicy, SandboxError
from snapshots.sandbox.egress import EGRESS_PORT, start_egress_proxy
from snapshots.sandbox.launch import proc_starttime

log = logging.getLogger(__name__)


def load_deny_list(
    sandbox_id: str,
    mode: str,
    nat_gid: int,
    deny: Sequence[netns.IPNetwork],
    exceptions: Sequence[netns.EgressException],
) -> None:
    """Load the host deny-list table of ``nat_gid`` (it holds one configuration: the last
    backend to load it wins). An ``open`` sandbox that would reach out without it is refused,
    naming what is missing (never the host's network)."""
    problem = netns.nat_problem() if mode == "open" else None
    if problem is None:
        try:
            netns.install_firewall(nat_gid, deny, exceptions)
        except (OSError, RuntimeError) as exc:
            problem = str(exc)
    if problem is not None and mode == "allowlist":
        # The proxy checks every address itself; the table is its backstop.
        log.warning(
            "egress deny-list table not loaded (%s); allowlist proxies still "
            "refuse private addresses themselves",
            problem,
        )
        problem = None
    if problem is not None:
        raise SandboxError(
            f"sandbox {sandbox_id}: egress {mode!r} is unavailable on this machine: "
            f"{problem}. Install it (scripts/system-packages) or use egress 'none'."
        )


def start_proxy(
    sdir: Path,
    run_dir: Path,
    state: dict[str, Any],
    network: NetworkPolicy,
    env: dict[str, str],
    config: dict[str, Any],
    *,
    hosts: Mapping[str, str],
    uid: int,
    gid: int,
    deny: Sequence[netns.IPNetwork],
    exceptions: Sequence[netns.EgressException],
) -> subprocess.Popen[bytes]:
    """Start an ``allowlist`` sandbox's proxy, and point the init (its forwarder) and the
    commands' environment at it."""
    proxy = start_egress_proxy(
        run_dir / "egress.sock",
        network,
        hosts,
        uid=uid,
        gid=gid,
        log_path=sdir / "egress.log",
        deny=deny,
        exceptions=exceptions,
    )
    state["proxy_pid"], state["proxy_start"] = proxy.pid, proc_starttime(proxy.pid)
    config["egress_port"] = EGRESS_PORT
    config["egress_socket"] = "/run/inspect/egress.sock"
    proxy_url = f"http://127.0.0.1:{EGRESS_PORT}"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.setdefault(var, proxy_url)
    env.setdefault("NO_PROXY", "localhost,127.0.0.1,::1")
    env.setdefault("no_proxy", "localhost,127.0.0.1,::1")
    return proxy


def start_nat(
    sdir: Path, state: dict[str, Any], gid: int, **target: Any
) -> subprocess.Popen[bytes]:
    """User-mode NAT for an ``open`` sandbox; see netns.py for what it can reach."""
    try:
        nat = netns.start_nat(gid=gid, log_path=sdir / "nat.log", **target)
    except (OSError, RuntimeError) as exc:
        raise SandboxError(f"sandbox {state['id']}: cannot set up its NAT: {exc}") from None
    state["nat_pid"], state["nat_start"] = nat.pid, proc_starttime(nat.pid)
    return nat
