"""What `manage.py inspect doctor` says about the agent runtimes: each one, its version and
whether it works on this machine — in the words a turn would fail with, before any session runs.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError

from sessions.agents import AgentError
from sessions.agents import provider_accounts as accounts
from sessions.agents.providers import DEFAULT_MODELS, llm_provider, require_upstream
from snapshots import agent_installs
from snapshots.models import Repository, Snapshot
from snapshots.recipe import RecipeError, parse_recipe


def recipe_pins() -> dict[tuple[str, str], list[str]]:
    """The agent CLI versions repositories' recipes pin: (runtime, version) -> repositories.
    A repository's recipe is its dashboard override, else the one of its newest snapshot."""
    pins: dict[tuple[str, str], list[str]] = {}
    for repository in Repository.objects.order_by("name"):
        text, where = repository.recipe_override, "the recipe set in the dashboard"
        if not text.strip():
            # Its newest build's, even a failed one: a pin that cannot work fails the build.
            snapshot = (
                Snapshot.objects.filter(repository=repository)
                .exclude(state=Snapshot.State.BUILDING)
                .exclude(recipe_toml="")
                .order_by("-created_at")
                .first()
            )
            if snapshot is None or not snapshot.recipe_toml.strip():
                continue
            text, where = snapshot.recipe_toml, snapshot.recipe_source or "recipe"
        try:
            recipe = parse_recipe(text, where=where)
        except RecipeError:
            continue  # its snapshot build says what is wrong with it
        for runtime, version in recipe.agents:
            pins.setdefault((runtime, version), []).append(repository.name)
    return pins


def install_agents(echo: Callable[[str], None]) -> list[str]:
    """Install every pinned CLI and every version a recipe pins; one line per step through
    `echo`. Returns the failures (npm's own words), empty when everything is installed."""
    failures = []
    wanted = [(runtime, cli.version) for runtime, cli in agent_installs.PINNED.items()]
    try:
        wanted += [pin for pin in recipe_pins() if pin not in wanted]
    except DatabaseError as exc:
        echo(f"recipe pins: not read (the database is not reachable: {exc})")
    problem = agent_installs.tools_problem()
    if problem:
        echo(f"agent CLIs: {problem}")
        return [problem]
    for runtime, version in wanted:
        package = f"{agent_installs.PINNED[runtime].package}@{version}"
        if agent_installs.is_installed(runtime, version):
            agent_installs.install(runtime, version)  # links the pinned version's bin/ if needed
            echo(f"{package}: already installed at {agent_installs.install_dir(runtime, version)}")
            continue
        try:
            where = agent_installs.install(runtime, version)
        except (agent_installs.InstallError, OSError) as exc:
            failures.append(f"{runtime} {version}: {exc}")
            echo(f"{package}: NOT installed: {exc}")
            continue
        echo(f"{package}: installed at {where}")
    return failures


def runtime_lines() -> list[str]:
    """One line per runtime: builtin (its provider and model, configured or not), command, and
    each CLI at the platform's pinned version and at every version a recipe pins."""
    lines = ["command: runs the session's own command in the sandbox (nothing to configure)"]
    provider = llm_provider()
    model = accounts.default_model() or DEFAULT_MODELS[provider]
    try:
        require_upstream("builtin")
        lines.append(f"builtin: {provider} model {model}: configured")
    except AgentError as exc:
        lines.append(f"builtin: {provider} model {model}: NOT configured: {exc}")
    for runtime, cli in agent_installs.PINNED.items():
        try:
            require_upstream(runtime)
            model = "model settings configured"
        except AgentError as exc:
            model = f"NOT configured: {exc}"
        lines.append(
            f"{agent_installs.describe(agent_installs.status(runtime))} "
            f"[{cli.label}, {cli.package}; {model}]"
        )
    try:
        pins = recipe_pins()
    except DatabaseError as exc:
        pins = {}
        first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        lines.append(f"recipe pins: not read (the database is not reachable: {first})")
    for (runtime, version), repositories in sorted(pins.items()):
        if version == agent_installs.PINNED[runtime].version:
            continue
        lines.append(
            f"{agent_installs.describe(agent_installs.status(runtime, version))} "
            f"[pinned by the recipe of {', '.join(repositories)}]"
        )
    problem = agent_installs.tools_problem()
    if problem:
        lines.append(f"agent CLIs: {problem}")
    lines.append(
        f"agent CLIs: installed in {settings.AGENT_CLIS_DIR}, read-only in every sandbox at "
        f"{agent_installs.AGENT_TOOLS_MOUNT} (install: manage.py inspect doctor --install-agents)"
    )
    return lines
