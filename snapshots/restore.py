"""Restoring a repository's sandbox: newest ready snapshot + drift sync + `start` commands."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

from approvals.audit import record
from approvals.secrets import SecretsUnavailable, secret_env
from snapshots import mirror
from snapshots.actions import snapshot_refresh_request
from snapshots.backends import sandbox_backend
from snapshots.egress import egress_in_force
from snapshots.models import Repository, Snapshot
from snapshots.recipe import LOCKFILE_PATTERNS, Recipe, parse_recipe
from snapshots.sandbox import ExecResult, Limits, NetworkPolicy, Sandbox, SandboxError, SnapshotRef

SYNC_BUNDLE = ".git/inspect-sync.bundle"
GIT = "git -c safe.directory=*"


class NoSnapshot(Exception):
    """The repository has no ready snapshot yet; the message says how to build one."""


@dataclass
class Restored:
    sandbox: Sandbox
    snapshot: Snapshot
    recipe: Recipe
    commit: str
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds
    drift_commits: int = 0
    drift_files: list[str] = field(default_factory=list)
    stale: bool = False  # a lockfile changed since the snapshot; setup was re-run


def newest_ready(repository: Repository, branch: str | None = None) -> Snapshot:
    branch = branch or repository.default_branch
    snapshot = (
        Snapshot.objects.filter(repository=repository, branch=branch, state=Snapshot.State.READY)
        .order_by("-created_at")
        .first()
    )
    if snapshot is None:
        raise NoSnapshot(
            f"{repository.name} has no ready snapshot of branch {branch!r}; build one with "
            f"`python manage.py inspect snapshot refresh {repository.name}`"
        )
    return snapshot


def recipe_built_with(snapshot: Snapshot) -> Recipe:
    """The recipe `snapshot` was built with, as it was (the default when it had none)."""
    if not snapshot.recipe_toml.strip():
        return Recipe()
    return parse_recipe(snapshot.recipe_toml, where=snapshot.recipe_source or "recipe")


def recipe_of(snapshot: Snapshot) -> Recipe:
    """The recipe `snapshot` was built with, its egress replaced by the egress in force (what
    every sandbox of the repository gets: restore, preview, screenshots, verify)."""
    recipe = recipe_built_with(snapshot)
    return replace(recipe, egress=egress_in_force(snapshot.repository, recipe.egress))


def current_recipe(repository: Repository) -> Recipe:
    """The dashboard's recipe, else the newest ready snapshot's, else the default; its egress
    is the egress in force."""
    if repository.recipe_override.strip():
        recipe = parse_recipe(repository.recipe_override, where="the recipe set in the dashboard")
        return replace(recipe, egress=egress_in_force(repository, recipe.egress))
    snapshot = (
        Snapshot.objects.filter(repository=repository, state=Snapshot.State.READY)
        .order_by("-created_at")
        .first()
    )
    if snapshot is None:
        return replace(Recipe(), egress=egress_in_force(repository, NetworkPolicy()))
    return recipe_of(snapshot)


def restore_sandbox(
    repository: Repository,
    *,
    branch: str | None = None,
    snapshot: Snapshot | None = None,
    snapshot_ref: str | None = None,
    sandbox_id: str | None = None,
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
    sync: bool = True,
    run_start: bool = True,
    on_command: Callable[[str, str, ExecResult], None] | None = None,
) -> Restored:
    """Restore a sandbox of `repository` from `snapshot` (default: the newest ready one of the
    branch); `snapshot_ref` (a session's own snapshot) wins over it as the filesystem. Drift since
    the snapshot's commit is applied from the mirror, with no credentials and no network inside
    the sandbox. Each `start` command is audited: through `on_command(phase, command, result)`
    (a session's runner puts it in the session's log), else as the repository's."""
    snapshot = snapshot or newest_ready(repository, branch)
    recipe = recipe_of(snapshot)
    backend = sandbox_backend()
    timings: dict[str, float] = {}
    started = time.perf_counter()
    sandbox = backend.create(
        snapshot=SnapshotRef.parse(snapshot_ref or snapshot.backend_ref),
        sandbox_id=sandbox_id,
        network=recipe.egress,
        env=env,
        limits=limits,
        labels={"repository": repository.name},
    )
    timings["restore_ms"] = _ms(started)
    restored = Restored(sandbox=sandbox, snapshot=snapshot, recipe=recipe, commit=snapshot.commit)
    restored.timings = timings
    try:
        if sync and snapshot_ref is None:
            started = time.perf_counter()
            sync_drift(restored, repository)
            timings["sync_ms"] = _ms(started)
        if run_start and recipe.start:
            started = time.perf_counter()
            run_start_commands(
                restored, repository, on_command or partial(_audit_command, repository, sandbox)
            )
            timings["start_ms"] = _ms(started)
    except BaseException:
        sandbox.terminate()
        raise
    return restored


def run_start_commands(
    restored: Restored,
    repository: Repository,
    audit_command: Callable[[str, str, ExecResult], None],
) -> None:
    """Run the recipe's `start` commands, each reported to `audit_command`. Only a command that
    names secrets gets them, and runs as a service: it keeps running, and no other command can
    read what it was given."""
    recipe, sandbox = restored.recipe, restored.sandbox
    available = _secret_env(repository) if any(c.secrets for c in recipe.start) else {}
    for entry in recipe.start:
        missing = [name for name in entry.secrets if name not in available]
        if missing:
            raise SandboxError(
                f"start command {entry.command!r} needs the secret {missing[0]}, which "
                f"repository {repository.name} does not have: add it on the repository's "
                "secrets page or remove it from the recipe"
            )
        result = sandbox.run(
            entry.command,
            cwd="/workspace",
            timeout=300,
            secrets={name: available[name] for name in entry.secrets} or None,
            service=bool(entry.secrets),
        )
        audit_command("start", entry.command, result)
        if not result.ok:
            raise SandboxError(
                f"start command {entry.command!r} failed with exit code {result.exit_code}: "
                f"{result.stderr.strip()[-500:]}"
            )


def sync_drift(restored: Restored, repository: Repository, *, fetch: bool = False) -> None:
    """Catch the restored workspace up with the branch head in the mirror (fetched first when
    `fetch`); a changed lockfile re-runs `setup` and queues a snapshot refresh."""
    mirror_dir = mirror.mirror_path(repository.name)
    if fetch:
        mirror.update_mirror(repository.name, repository.url)
    if not (mirror_dir / "HEAD").exists():
        return
    head = mirror.head_commit(mirror_dir, restored.snapshot.branch)
    # From the workspace's commit: a warm-pool sandbox was synced when it was made.
    base = restored.commit or restored.snapshot.commit
    if head == base:
        return
    commits, paths = mirror.drift(mirror_dir, base, head)
    data = mirror.bundle(mirror_dir, base, head, restored.snapshot.branch)
    sandbox = restored.sandbox
    sandbox.write_file(SYNC_BUNDLE, data)
    branch = restored.snapshot.branch
    result = sandbox.run(
        # The restored files have new stat data; refresh the index so git sees them unchanged.
        f"{GIT} update-index -q --refresh >/dev/null;"
        f" {GIT} fetch --quiet {SYNC_BUNDLE} +refs/heads/{branch}:refs/inspect/sync"
        f" && {GIT} reset --quiet --keep refs/inspect/sync && rm -f {SYNC_BUNDLE}",
        cwd="/workspace",
        timeout=300,
    )
    if not result.ok:
        raise SandboxError(f"catching up {commits} commits failed: {result.stderr.strip()[-500:]}")
    restored.commit, restored.drift_commits, restored.drift_files = head, commits, paths
    lockfiles = _lockfiles_in(restored, paths)
    if lockfiles:
        restored.stale = True
        secrets = _secret_env(repository)
        for command in restored.recipe.setup:
            result = sandbox.run(command, cwd="/workspace", secrets=secrets)
            if not result.ok:
                raise SandboxError(
                    f"re-running setup after {lockfiles[0]} changed failed: "
                    f"{command!r} exited {result.exit_code}"
                )
        snapshot_refresh_request(repository)


def _lockfiles_in(restored: Restored, paths: list[str]) -> list[str]:
    return [
        path
        for path in paths
        if path in restored.snapshot.lockfile_hashes
        or any(fnmatch.fnmatch(path.rsplit("/", 1)[-1], p) for p in LOCKFILE_PATTERNS)
    ]


def changed_lockfiles(restored: Restored, repository: Repository) -> list[str]:
    """The lockfiles the drift between the workspace and the mirror's branch head changes
    (what would make `sync_drift` re-run `setup`)."""
    mirror_dir = mirror.mirror_path(repository.name)
    if not (mirror_dir / "HEAD").exists():
        return []
    head = mirror.head_commit(mirror_dir, restored.snapshot.branch)
    return _lockfiles_in(restored, mirror.drift(mirror_dir, restored.commit, head)[1])


def _secret_env(repository: Repository) -> dict[str, str]:
    try:
        return secret_env(repository, scope="setup_start")
    except SecretsUnavailable as exc:
        raise SandboxError(str(exc)) from None


def _audit_command(
    repository: Repository, sandbox: Sandbox, phase: str, command: str, result: ExecResult
) -> None:
    data = {"command": command, "phase": phase, "exit_code": result.exit_code, "ok": result.ok}
    record(
        "sandbox.command",
        repository=repository,
        object_type="sandbox",
        object_id=sandbox.id,
        data=data,
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
