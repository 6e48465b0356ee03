"""Real sandboxes for the real OpenCode CLI against the stand-in model (and, for attack tests,
an attacker's server): an allowlist sandbox reaches each server by a name only its egress proxy
resolves (tests/sessions/agents/standin_sandbox.py); the platform's pinned CLIs are mounted
read-only and first on PATH."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from snapshots.sandbox.base import Limits, Sandbox, SnapshotRef
from tests.sessions.agents.standin_sandbox import StandinSandboxes
from tests.standin_model import StandinModel

PROVIDERS = ("anthropic", "openai")


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
) -> Iterator[tuple[Callable[[SnapshotRef], Sandbox], Sandbox, dict[str, str]]]:
    """(create, sandbox, {name: url}): a sandbox whose workspace holds `files` (a git
    repository, as sessions' are) and that reaches each server as http://<name>:<port>;
    `create(snapshot)` restores another such sandbox from a snapshot (the next turn's)."""
    sandboxes = StandinSandboxes(
        tmp_path, tools_dir, servers, limits=Limits(wall_seconds=600, memory_mb=2048, pids=256)
    )
    box = sandboxes.create(files, git="none")
    box.run(["git", "init", "-q", "."], timeout=60)
    try:
        yield sandboxes.restore, box, sandboxes.urls
    finally:
        sandboxes.close()
