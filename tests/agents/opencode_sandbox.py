"""Real sandboxes for the real OpenCode CLI against the stand-in model (and, for attack tests,
an attacker's server): an allowlist sandbox reaches each server by a name only its egress proxy
resolves; the platform's pinned CLIs are mounted read-only and first on PATH."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.standin_model import StandinModel

PROVIDERS = ("anthropic", "openai")


def skip_without_sandbox() -> None:
    from tests.security.test_sandbox_network import _skip_reason

    if reason := _skip_reason("bwrap"):
        pytest.skip(reason)


def configure(settings, provider: str, url: str, key: str, model: str = "") -> None:
    """The platform's settings for one provider, the other unset (what an operator configures)."""
    settings.LLM_PROVIDER = "auto"
    settings.LLM_MODEL = model
    settings.LLM_API_KEY = settings.ANTHROPIC_API_KEY = ""
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    settings.ANTHROPIC_BASE_URL = "https://api.anthropic.com"
    if provider == "anthropic":
        settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = key, url
    else:
        settings.LLM_API_KEY, settings.LLM_BASE_URL = key, url + "/v1"


@contextlib.contextmanager
def sandbox_for(
    tmp_path: Path,
    tools_dir: Path,
    files: Mapping[str, str | bytes],
    servers: Mapping[str, StandinModel],
) -> Iterator[tuple]:
    """(create, sandbox, {name: url}): a sandbox whose workspace holds `files` (a git
    repository, as sessions' are) and that reaches each server as http://<name>:<port>;
    `create(snapshot)` restores another such sandbox from a snapshot (the next turn's)."""
    from snapshots.sandbox.base import Limits, NetworkPolicy
    from snapshots.sandbox.local import LocalBackend

    src = tmp_path / "src"
    for name, content in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        (src / name).write_bytes(data)
    hosts: dict[str, str] = {}
    exceptions: tuple = ()
    urls = {}
    for name, server in servers.items():
        route = server.sandbox_route(name)
        hosts.update(route.egress_hosts)
        exceptions += route.egress_exceptions
        urls[name] = route.url
    backend = LocalBackend(
        tmp_path / "sandboxes",
        egress_hosts=hosts,
        egress_exceptions=exceptions,
        tools_dir=tools_dir,
    )
    boxes = []

    def create(snapshot):
        box = backend.create(
            snapshot=snapshot,
            network=NetworkPolicy("allowlist", tuple(servers)),
            limits=Limits(wall_seconds=600, memory_mb=2048, pids=256),
        )
        boxes.append(box)
        return box

    box = create(backend.snapshot_from_directory(str(src)))
    box.run(["git", "init", "-q", "."], timeout=60)
    try:
        yield create, box, urls
    finally:
        for each in boxes:
            each.terminate()
