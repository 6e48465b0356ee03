"""Real sandboxes (the local backend, the platform's pinned agent CLIs on PATH) whose allowlist
egress reaches stand-in model servers (tests/standin_model/) through the sandbox's proxy: what
the tests of the real CLIs run in. The one home of "a LocalBackend routed to the stand-in model"
(Claude Code, Codex and OpenCode tests alike).

Each server is reached by a name only the sandbox's egress proxy resolves (``model.test`` for
one stand-in; attack tests add an attacker's server under a name of its own), with an operator
exception for exactly its address and port.

`standin_sandboxes` gives each run a NAT group of its own: the host nftables table of a group
holds one operator configuration (the last backend to load it wins), so test processes running
at the same time, each with its own stand-in port, would otherwise refuse each other's stand-in."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from snapshots.sandbox.base import Limits, NetworkPolicy, Sandbox, SnapshotRef
from snapshots.sandbox.local import LocalBackend
from tests.security.test_sandbox_network import _skip_reason
from tests.standin_model import SandboxRoute, StandinModel

STANDIN_KEY = "sk-standin-claude-0123456789abcdef"


def skip_without_sandbox() -> None:
    if reason := _skip_reason("bwrap"):
        pytest.skip(reason)


class StandinSandboxes:
    """A local backend under ``root`` whose sandboxes reach each of ``servers`` ({name: server})
    as ``urls[name]``; ``route``/``standin`` are the first server's. Its NAT group is its own
    (derived from the first server's port; its nftables table is deleted on close); ``limits``:
    those of every sandbox (the backend's default when None)."""

    def __init__(
        self,
        root: Path,
        tools_dir: Path | None,
        servers: Mapping[str, StandinModel],
        *,
        limits: Limits | None = None,
    ) -> None:
        self.root = root
        routes = {name: server.sandbox_route(name) for name, server in servers.items()}
        self.standin = next(iter(servers.values()))
        self.route: SandboxRoute = next(iter(routes.values()))
        self.urls = {name: route.url for name, route in routes.items()}
        self.nat_gid = 120_000 + self.standin.port % 10_000
        self.limits = limits
        hosts: dict[str, str] = {}
        exceptions: tuple = ()
        for route in routes.values():
            hosts.update(route.egress_hosts)
            exceptions += route.egress_exceptions
        self.backend = LocalBackend(
            root / "sandboxes",
            egress_hosts=hosts,
            egress_exceptions=exceptions,
            tools_dir=tools_dir,
            nat_gid=self.nat_gid,
        )
        self._boxes: list[Sandbox] = []
        self._trees = 0

    def snapshot(self, files: Mapping[str, str | bytes], *, git: str = "dir") -> SnapshotRef:
        """A snapshot of a tree holding `files`. ``git``: "dir" an empty .git directory (as a
        clone has one), "commit" a repository with the files committed, "none" no .git."""
        self._trees += 1
        src = self.root / f"tree{self._trees}"
        src.mkdir(parents=True)
        if git == "dir":
            (src / ".git").mkdir()
        for name, content in files.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes(content.encode() if isinstance(content, str) else content)
        if git == "commit":
            run = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@example.com"]
            subprocess.run([*run, "init", "-q"], check=True)
            subprocess.run([*run, "add", "."], check=True)
            subprocess.run([*run, "commit", "-qm", "start"], check=True)
        return self.backend.snapshot_from_directory(str(src))

    def create(self, files: Mapping[str, str | bytes], *, git: str = "dir") -> Sandbox:
        """A sandbox whose workspace holds `files` (see `snapshot`)."""
        return self.restore(self.snapshot(files, git=git))

    def restore(self, ref: SnapshotRef) -> Sandbox:
        """A sandbox from a snapshot (as the next turn of a session starts from the last)."""
        box = self.backend.create(
            snapshot=ref,
            network=NetworkPolicy("allowlist", tuple(self.urls)),
            limits=self.limits,
        )
        self._boxes.append(box)
        return box

    def close(self) -> None:
        for box in self._boxes:
            with contextlib.suppress(Exception):
                box.terminate()
        with contextlib.suppress(Exception):
            self.backend.reap()
        if shutil.which("nft"):
            subprocess.run(
                ["nft", "delete", "table", "inet", f"inspect_egress_{self.nat_gid}"],
                capture_output=True,
                check=False,
            )


@contextlib.contextmanager
def standin_sandboxes(root: Path, tools_dir: Path) -> Iterator[StandinSandboxes]:
    """One stand-in (key `STANDIN_KEY`) and sandboxes that reach it."""
    skip_without_sandbox()
    with StandinModel(key=STANDIN_KEY) as standin:
        made = StandinSandboxes(
            root,
            tools_dir,
            {"model.test": standin},
            limits=Limits(wall_seconds=900, memory_mb=2048, pids=256),
        )
        try:
            yield made
        finally:
            made.close()


class GatewaySandboxes(StandinSandboxes):
    """Sandboxes as the platform makes them for a session since the model gateway: egress
    `none` (or an allowlist of attack servers only), and the gateway at 127.0.0.1:4181 through
    their door — the gateway in front of `upstream`, the stand-in model as the provider, holding
    the platform's key. A runtime is given `route(token)`; ``standin`` is the upstream."""

    def __init__(
        self,
        root: Path,
        tools_dir: Path | None,
        gateway,
        upstream: StandinModel,
        *,
        servers: Mapping[str, StandinModel] | None = None,
        limits: Limits | None = None,
    ) -> None:
        servers = dict(servers or {})
        routes = {name: server.sandbox_route(name) for name, server in servers.items()}
        self.root = root
        self.standin = upstream
        self.urls = {name: route.url for name, route in routes.items()}
        self.nat_gid = 120_000 + upstream.port % 10_000
        self.limits = limits
        hosts: dict[str, str] = {}
        exceptions: tuple = ()
        for route in routes.values():
            hosts.update(route.egress_hosts)
            exceptions += route.egress_exceptions
        self.gateway = gateway
        self.sessions: list[Any] = []
        self.tokens: list[str] = []
        self.backend = LocalBackend(
            root / "sandboxes",
            egress_hosts=hosts,
            egress_exceptions=exceptions,
            tools_dir=tools_dir,
            nat_gid=self.nat_gid,
            gateway_socket=gateway.socket_path,
        )
        self._boxes = []
        self._trees = 0

    # Set by the fixture: mints a turn's token, (token, session), as the runner does.
    mint: Callable[[str], tuple[str, Any]]

    def route(self, token: str):
        """What the runner gives a runtime in one of these sandboxes for the turn's token."""
        from sessions.model_access import gateway_base, route_for  # why: needs Django set up

        return route_for(gateway_base(self.backend.name), token)

    def turn_route(self, runtime: str):
        """A new turn's route for `runtime`; the turn's session is kept in `sessions`."""
        token, session = self.mint(runtime)
        self.sessions.append(session)
        self.tokens.append(token)
        return self.route(token)

    def restore(self, ref: SnapshotRef) -> Sandbox:
        policy = NetworkPolicy("allowlist", tuple(self.urls)) if self.urls else NetworkPolicy()
        box = self.backend.create(snapshot=ref, network=policy, limits=self.limits)
        self._boxes.append(box)
        return box


@contextlib.contextmanager
def gateway_sandboxes(
    root: Path, tools_dir: Path, gateway, upstream: StandinModel, **options
) -> Iterator[GatewaySandboxes]:
    """Sandboxes that reach models only through the gateway (see GatewaySandboxes)."""
    skip_without_sandbox()
    made = GatewaySandboxes(
        root, tools_dir, gateway, upstream,
        limits=Limits(wall_seconds=900, memory_mb=2048, pids=256), **options,
    )  # fmt: skip
    try:
        yield made
    finally:
        made.close()
