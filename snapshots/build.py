"""Building repository snapshots: mirror → clone → `setup` in a sandbox → frozen snapshot.

One build at a time per repository (a Redis lock); a failed build leaves the last ready
snapshot serving and records its log and exit code on the failed Snapshot row. Nothing is marked
ready unless every step finished.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.redaction import redact
from approvals.secrets import SecretsUnavailable, secret_env
from inspect_web.redis_client import get_redis
from snapshots import agent_installs, incremental, mirror
from snapshots.backends import sandbox_backend
from snapshots.egress import as_json, egress_for_build
from snapshots.live_log import LiveLog
from snapshots.models import Repository, Snapshot
from snapshots.recipe import (
    LOCKFILE_PATTERNS,
    RECIPE_PATH,
    Recipe,
    RecipeError,
    load_recipe,
    read_recipe_file,
)
from snapshots.repository_files import lockfile_hashes
from snapshots.sandbox import Limits, SandboxError, SnapshotNotFound, SnapshotRef

log = logging.getLogger(__name__)

LOG_HEAD = 20_000
LOG_TAIL = 40_000
LOCK_SECONDS = 3 * 3600
NO_SPACE = "No space left on device"  # strerror(ENOSPC), as git and cp print it
# Never a change a person made: what running Python, its tests and linters leave behind.
TOOL_CACHES = ("__pycache__/", "*.py[cod]", ".pytest_cache/", ".ruff_cache/", ".mypy_cache/")


class BuildFailed(Exception):
    def __init__(self, message: str, exit_code: int | None = None) -> None:
        self.exit_code = exit_code
        super().__init__(message)


class BuildLog:
    """Build output kept whole up to a cap, then as head and tail."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self.head: list[str] = []
        self.tail: list[str] = []
        self.size = 0
        self.dropped = 0
        self.echo = echo
        self.secrets: list[str] = []
        self.live: LiveLog | None = None  # watched while it runs (the settings' "Build now")

    def write(self, line: str) -> None:
        line = redact(line, self.secrets)  # setup sees repository secrets; the log never does
        if self.echo:
            self.echo(line)
        if self.live is not None:
            self.live.append(line)
        if self.size < LOG_HEAD:
            self.head.append(line)
            self.size += len(line) + 1
            return
        self.tail.append(line)
        tail_size = sum(len(t) + 1 for t in self.tail)
        while tail_size > LOG_TAIL and self.tail:
            tail_size -= len(self.tail.pop(0)) + 1
            self.dropped += 1

    def text(self) -> str:
        middle = [f"… {self.dropped} lines omitted …"] if self.dropped else []
        return "\n".join([*self.head, *middle, *self.tail])


def _lock(repository: Repository):
    return get_redis().lock(f"inspect:snapshot-build:{repository.pk}", timeout=LOCK_SECONDS)


def snapshot_build(
    repository: Repository,
    *,
    branch: str | None = None,
    echo: Callable[[str], None] | None = None,
    full: bool = False,
) -> Snapshot:
    """Build a new snapshot, or wait for the build already under way and return its result.
    Unless `full`, a refresh stacks on the previous snapshot when it can, and builds nothing
    when the branch and recipe have not moved (snapshots/incremental.py)."""
    lock = _lock(repository)
    if not lock.acquire(blocking=False):
        if echo:
            echo(f"a build of {repository.name} is under way; waiting for it")
        lock.acquire(blocking=True, blocking_timeout=LOCK_SECONDS)
        lock.release()
        latest = Snapshot.objects.filter(repository=repository).first()
        if latest is not None:
            return latest
        lock.acquire(blocking=True)
    try:
        return _build(repository, branch or repository.default_branch, BuildLog(echo), full)
    finally:
        lock.release()


def _build(repository: Repository, branch: str, build_log: BuildLog, full: bool) -> Snapshot:
    backend = sandbox_backend()
    # We hold the build lock, so a row still "building" is from a build whose worker died.
    Snapshot.objects.filter(repository=repository, state=Snapshot.State.BUILDING).update(
        state=Snapshot.State.FAILED, error="the build was interrupted (its worker stopped)"
    )
    checked = None if full else incremental.unchanged(repository, branch, backend.name)
    if checked is not None:
        build_log.write(
            f"{branch} is still at {checked.commit[:12]} and the recipe has not changed: "
            f"snapshot {checked.pk} stays (checked {checked.checked_at:%Y-%m-%d %H:%M:%S})"
        )
        return checked
    snapshot = Snapshot.objects.create(
        repository=repository, branch=branch, backend=backend.name, state=Snapshot.State.BUILDING
    )
    build_log.live = LiveLog(snapshot.pk)
    workdir = settings.DATA_DIR / "builds" / str(snapshot.pk)
    started = time.monotonic()
    refs_to_drop = []
    try:
        build_log.write(f"$ git fetch {repository.url}")
        mirror_dir = mirror.update_mirror(repository.name, repository.url)
        _note_reverts(repository, mirror_dir)
        workspace = workdir / "workspace"
        workdir.mkdir(parents=True, exist_ok=True)
        snapshot.commit = mirror.checkout(mirror_dir, branch, workspace)
        build_log.write(f"checked out {branch} at {snapshot.commit}")
        recipe = load_recipe(workspace, repository.recipe_override)
        snapshot.recipe_source = recipe.source
        # The recipe asks; the last approved egress decides (a widening waits for a reviewer).
        egress = egress_for_build(
            repository,
            recipe.egress,
            source=recipe.source,
            default_branch=branch == repository.default_branch,
            authors=_recipe_authors(mirror_dir, snapshot.commit),
        )
        if egress.note:
            build_log.write(f"egress: {egress.note}")
        recipe = replace(recipe, egress=egress.policy)
        snapshot.egress = as_json(egress.policy)
        if recipe.refresh_minutes != repository.refresh_minutes:
            Repository.objects.filter(pk=repository.pk).update(
                refresh_minutes=recipe.refresh_minutes
            )
        # Read without following links: a committed link must not make the worker read the host.
        snapshot.recipe_toml = repository.recipe_override or read_recipe_file(workspace)
        snapshot.lockfile_hashes = lockfile_hashes(workspace, LOCKFILE_PATTERNS)
        _install_agent_pins(recipe, build_log, backend.name)
        previous, why = (
            (None, "a full build was asked for")
            if full
            else incremental.stack_base(repository, snapshot, backend.name, mirror_dir)
        )
        ref = None
        if previous is not None:
            build_log.write(f"incremental refresh: {why}")
            try:
                ref = _run_setup(
                    repository, snapshot, recipe, build_log,
                    base=SnapshotRef.parse(previous.backend_ref),
                    commands=recipe.refresh, catch_up=(mirror_dir, previous),
                )  # fmt: skip
            except (incremental.CatchUpFailed, SnapshotNotFound) as exc:
                build_log.write(f"{exc}; rebuilding from scratch")
                previous = None
        else:
            build_log.write(f"full build: {why}")
        if ref is None:
            base_ref = backend.snapshot_from_directory(
                str(workspace), labels={"repository": repository.name}
            )
            if not recipe.setup:
                ref = base_ref
                snapshot.size_bytes, snapshot.file_count = _measure(workspace)
            else:
                refs_to_drop.append(base_ref)
                ref = _run_setup(
                    repository, snapshot, recipe, build_log, base=base_ref, commands=recipe.setup
                )
        snapshot.backend_ref = str(ref)
        snapshot.exit_code = 0
        with transaction.atomic():
            incremental.record_layers(snapshot, previous)
            _finish(snapshot, build_log, started, Snapshot.State.READY)
            Snapshot.objects.filter(
                repository=repository, branch=branch, state=Snapshot.State.READY
            ).exclude(pk=snapshot.pk).update(state=Snapshot.State.SUPERSEDED)
        build_log.write(f"snapshot {snapshot.pk} ready in {snapshot.build_seconds:.1f} s")
    except (mirror.MirrorError, RecipeError, BuildFailed, SandboxError, OSError) as exc:
        snapshot.error = _describe(exc)
        snapshot.exit_code = getattr(exc, "exit_code", None)
        build_log.write(f"error: {snapshot.error}")
        _finish(snapshot, build_log, started, Snapshot.State.FAILED)
        log.warning("snapshot build of %s failed: %s", repository.name, snapshot.error)
    finally:
        for ref in refs_to_drop:
            try:
                backend.delete_snapshot(ref)
            except SandboxError as exc:
                log.warning("could not delete intermediate snapshot %s: %s", ref, exc)
        shutil.rmtree(workdir, ignore_errors=True)
    return snapshot


def _run_setup(
    repository: Repository,
    snapshot: Snapshot,
    recipe: Recipe,
    build_log: BuildLog,
    *,
    base: SnapshotRef,
    commands: tuple[str, ...],
    catch_up: tuple[Path, Snapshot] | None = None,
) -> SnapshotRef:
    """Run `commands` (`setup`, or `refresh` on top of the previous snapshot brought to the new
    commit by `catch_up`) in a sandbox restored from `base`, and freeze it. Both get the same
    secrets and the same egress: the build's."""
    env = _secret_env(repository)
    build_log.secrets = list(env.values())
    started = time.monotonic()
    sandbox = sandbox_backend().create(
        snapshot=base,
        network=recipe.egress,
        limits=Limits(wall_seconds=settings.SNAPSHOT_SETUP_TIMEOUT),
        labels={
            "repository": repository.name,
            "purpose": "snapshot-refresh" if catch_up else "snapshot-build",
        },
    )
    phase = "refresh" if catch_up else "setup"
    refused = 0  # egress refusals already in the log
    try:
        build_log.write(f"sandbox ready in {time.monotonic() - started:.2f} s")
        if catch_up is not None:
            started = time.monotonic()
            paths = incremental.catch_up(sandbox, catch_up[0], catch_up[1], snapshot.commit)
            build_log.write(
                f"brought the tree to {snapshot.commit[:12]} in "
                f"{time.monotonic() - started:.2f} s: {len(paths)} files changed"
            )
        for command in commands:
            build_log.write(f"$ {command}")
            # Secrets go to this exec only (contained: its tree ends with it), never
            # the sandbox's env or its files.
            handle = sandbox.exec(command, cwd="/workspace", secrets=env)
            for line in handle:
                build_log.write(line.text)
            result = handle.wait()
            for refusal in sandbox.egress_refusals(after=refused):
                refused += 1
                build_log.write(
                    f"egress refused: {refusal.get('host')}:{refusal.get('port')}"
                    f" ({refusal.get('reason')})"
                )
            if not result.ok:
                why = f"hit its {result.limit_hit} limit" if result.limit_hit else ""
                raise BuildFailed(
                    f"{phase} command {command!r} failed with exit code "
                    f"{result.exit_code}{' and ' + why if why else ''}",
                    exit_code=result.exit_code,
                )
        # What setup made (dependencies, build output) is the baseline, not a change:
        # keep it out of every session's diff and commits.
        # So are the caches that running code and tests leave (byte-code, test caches).
        caches = "" if catch_up else f" {' '.join(map(shlex.quote, TOOL_CACHES))}"
        sandbox.run(
            "git -c safe.directory=* ls-files --others --exclude-standard --directory"
            " | sed 's|^|/|' >> .git/info/exclude"
            + (f" && printf '%s\\n'{caches} >> .git/info/exclude" if caches else ""),
            cwd="/workspace",
        )
        measured = sandbox.run("du -sb . | cut -f1; find . -xdev | wc -l", cwd="/workspace")
        numbers = measured.stdout.split()
        if len(numbers) == 2:
            snapshot.size_bytes, snapshot.file_count = int(numbers[0]), int(numbers[1])
        started = time.monotonic()
        ref = sandbox.snapshot()
        build_log.write(f"frozen in {time.monotonic() - started:.2f} s")
        return ref
    finally:
        sandbox.terminate()


def _install_agent_pins(recipe, build_log: BuildLog, backend_name: str) -> None:
    """The agent CLI versions the recipe pins, installed on this worker (by npm, beside the
    platform's pinned ones) — never in the sandbox, which needs no egress to the npm registry."""
    for runtime, version in recipe.agents:
        if backend_name == "modal":
            if version != agent_installs.PINNED[runtime].version:
                raise BuildFailed(
                    f"agents.{runtime} = {version!r}: the Modal backend's image carries only "
                    f"the platform's version {agent_installs.PINNED[runtime].version}"
                )
            continue
        build_log.write(f"$ install agent CLI {agent_installs.PINNED[runtime].package}@{version}")
        try:
            agent_installs.ready(runtime, version, install_missing=True)
        except agent_installs.InstallError as exc:
            raise BuildFailed(f"agents.{runtime} = {version!r}: {exc}") from None
        build_log.write(
            f"{runtime} {version} is installed on the worker at "
            f"{agent_installs.install_dir(runtime, version)}"
        )


def _secret_env(repository: Repository) -> dict[str, str]:
    try:
        return secret_env(repository, scope="setup_start")
    except SecretsUnavailable as exc:
        raise BuildFailed(str(exc)) from None


def _finish(snapshot: Snapshot, build_log: BuildLog, started: float, state: str) -> None:
    snapshot.state = state
    snapshot.build_seconds = round(time.monotonic() - started, 3)
    snapshot.finished_at = timezone.now()
    snapshot.log = build_log.text()
    snapshot.save()


def _describe(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"the disk is full ({exc.filename or settings.DATA_DIR}); free space and refresh"
    if NO_SPACE in str(exc):  # said by a tool the build ran (git, cp), not raised as ENOSPC
        where = settings.SANDBOX_ROOT if isinstance(exc, SandboxError) else settings.DATA_DIR
        said = next(line for line in str(exc).splitlines() if NO_SPACE in line)
        return f"the disk is full ({where}); free space and refresh (the build stopped at: {said})"
    if isinstance(exc, mirror.MirrorError):
        return f"cannot fetch the repository: {exc}"
    return str(exc)


def _measure(tree: Path) -> tuple[int, int]:
    size = count = 0
    for root, dirs, files in os.walk(tree):
        count += len(dirs) + len(files)
        for name in files:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(root, name)).st_size
    return size, count


def _note_reverts(repository: Repository, mirror_dir: Path) -> None:
    """Tell the listeners what the fetch brought (it may revert a merged pull request, an
    escaped defect); a listener's failure must never fail the build."""
    answers = mirror.mirror_fetched.send_robust(
        Repository, repository=repository, mirror_dir=mirror_dir
    )
    for receiver, answer in answers:
        if isinstance(answer, Exception):
            log.error("after fetching %s, %s failed", repository.name, receiver, exc_info=answer)


def _recipe_authors(mirror_dir: Path, commit: str) -> list[str]:
    """Who wrote the recipe file's recent changes: they may not approve the egress it asks."""
    try:
        return mirror.path_authors(mirror_dir, commit, RECIPE_PATH)
    except mirror.MirrorError:
        return []
