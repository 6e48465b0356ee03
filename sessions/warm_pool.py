"""Warm pools: per repository, a few restored, synced, idle sandboxes of its newest snapshot,
ready for the next session's first turn, which claims one and only catches up the drift.

How many (the target) follows use: the sessions started at this hour of day (and the next) over
the last `INSPECT_POOL_HISTORY_DAYS` days, per day, rounded up; at least
`INSPECT_POOL_MIN_PER_REPOSITORY` for a repository with a ready snapshot, at most
`INSPECT_POOL_MAX_PER_REPOSITORY`; the whole site at most `INSPECT_POOL_MAX_SANDBOXES` (0: no
pools), and none is added while the host has less than `INSPECT_POOL_MIN_FREE_MB` available.

Isolation: a pool sandbox is made for one repository's newest snapshot, holds no secret (no
`start` command that names one has run in it; those run when it is claimed) and is claimed at
most once: the claim is an atomic pop of its entry followed by the removal of its id from the
members set, and nothing ever puts a sandbox back. Every pool sandbox is a member from before it
is created until it is claimed or terminated, so one half-made by a killed worker is found and
terminated by the next fill, and `drain_pools` (the supervisor's Ctrl-C) terminates them all.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db.models import Count
from django.db.models.functions import ExtractHour
from django.utils import timezone

from inspect_web.redis_client import get_redis
from sessions.models import Session
from snapshots.backends import sandbox_backend
from snapshots.egress import as_json
from snapshots.models import Repository, Snapshot
from snapshots.restore import (
    NoSnapshot,
    Restored,
    changed_lockfiles,
    newest_ready,
    recipe_of,
    restore_sandbox,
    run_start_commands,
    sync_drift,
)
from snapshots.sandbox import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxGone,
    SnapshotRef,
)

log = logging.getLogger(__name__)

MEMBERS = "inspect:pool:members"  # every unclaimed pool sandbox id → when it was registered
FILL_LOCK = "inspect:pool:filling"
FILL_TASK = "sessions.tasks.fill_sandbox_pools"
# A member with no entry this long after it was registered was half-made by a killed worker.
ORPHAN_SECONDS = 300


def _entries_key(repository_id: int) -> str:
    return f"inspect:pool:{repository_id}"


@dataclass(frozen=True)
class PoolEntry:
    sandbox_id: str
    repository_id: int
    snapshot_id: int
    commit: str  # the branch head the workspace was synced to
    started: bool  # the recipe's `start` commands have run (none of them names a secret)
    egress: dict  # the egress it was made with: a claim needs the one in force now

    def dumps(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def loads(cls, raw: bytes | str) -> PoolEntry:
        return cls(**json.loads(raw))


@dataclass
class Claimed:
    sandbox: Sandbox
    entry: PoolEntry


def enabled() -> bool:
    return settings.POOL_MAX_SANDBOXES > 0


def demand(repository: Repository, *, now=None) -> int:
    """Sandboxes this repository's pool should hold now, from its sessions by hour of day."""
    now = now or timezone.now()
    days = settings.POOL_HISTORY_DAYS
    hours = {now.hour, (now.hour + 1) % 24}  # fill ahead of the next hour's sessions
    by_hour = dict(
        Session.objects.filter(
            repository=repository, created_at__gte=now - timedelta(days=days), parent=None
        )
        .annotate(hour=ExtractHour("created_at"))
        .values_list("hour")
        .annotate(n=Count("pk"))
        .values_list("hour", "n")
    )
    wanted = max(math.ceil(by_hour.get(hour, 0) / days) for hour in hours)
    wanted = max(wanted, settings.POOL_MIN_PER_REPOSITORY)
    return min(wanted, settings.POOL_MAX_PER_REPOSITORY)


def targets(*, now=None) -> dict[int, int]:
    """Pool size per repository, the site-wide cap given to the busiest first."""
    wanted = {}
    for repository in Repository.objects.filter(archived_at__isnull=True):
        n = demand(repository, now=now)
        if (
            n
            and Snapshot.objects.filter(
                repository=repository, branch=repository.default_branch, state=Snapshot.State.READY
            ).exists()
        ):
            wanted[repository.pk] = n
    budget = settings.POOL_MAX_SANDBOXES
    sized = {}
    for repository_id, n in sorted(wanted.items(), key=lambda item: -item[1]):
        sized[repository_id] = min(n, budget)
        budget -= sized[repository_id]
    return sized


def available_memory_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def claim(repository: Repository, snapshot: Snapshot) -> Claimed | None:
    """A pool sandbox of `repository` restored from `snapshot`, now the caller's alone; None when
    the pool has none. An entry that is not of this repository and snapshot is terminated."""
    if snapshot.repository_id != repository.pk:
        return None
    redis = get_redis()
    while raw := redis.lpop(_entries_key(repository.pk)):
        entry = PoolEntry.loads(raw)
        if not redis.zrem(MEMBERS, entry.sandbox_id):
            continue  # terminated (or claimed) meanwhile
        if (
            entry.repository_id != repository.pk
            or entry.snapshot_id != snapshot.pk
            or entry.egress != as_json(recipe_of(snapshot).egress)
        ):
            # Another repository's, an older snapshot's, or made under another egress policy.
            _terminate(entry.sandbox_id)
            continue
        try:
            sandbox = sandbox_backend().attach(entry.sandbox_id)
        except SandboxGone:
            continue
        if not _made_from(sandbox, repository, snapshot):
            sandbox.terminate()  # a forged entry: the sandbox itself says it is another's
            continue
        return Claimed(sandbox=sandbox, entry=entry)
    return None


def _made_from(sandbox: Sandbox, repository: Repository, snapshot: Snapshot) -> bool:
    """What the backend recorded when it made the sandbox (the local backend's state, not the
    pool's entry in Redis) agrees: this repository, this snapshot."""
    state = getattr(sandbox, "state", None)
    if state is None:  # a backend that keeps no such record: the entry's checks stand
        return True
    labels = state.get("labels") or {}
    return (
        labels.get("repository") == repository.name
        and state.get("snapshot") == SnapshotRef.parse(snapshot.backend_ref).ref
    )


def claim_restored(
    repository: Repository,
    snapshot: Snapshot,
    *,
    on_command: Callable[[str, str, ExecResult], None],
) -> Restored | None:
    """`claim`, as a restore: its `start` commands that waited for the claim are run (reported
    to `on_command`), and the pool is topped up in the background."""
    pooled = claim(repository, snapshot)
    if pooled is None:
        return None
    restored = Restored(
        sandbox=pooled.sandbox,
        snapshot=snapshot,
        recipe=recipe_of(snapshot),
        commit=pooled.entry.commit,
    )
    # By name, and a moment later: the refill does not compete with this start for the CPU.
    current_app.send_task(FILL_TASK, countdown=2)
    if not pooled.entry.started:
        try:
            run_start_commands(restored, repository, on_command)
        except BaseException:
            pooled.sandbox.terminate()
            raise
    return restored


def pool_size(repository_id: int) -> int:
    return int(get_redis().llen(_entries_key(repository_id)))


def fill_pools(*, now=None) -> dict[int, int]:
    """Bring every pool to its target (one filler at a time); returns repository id → sandboxes
    added. Drops surplus, entries of replaced snapshots and orphans first."""
    redis = get_redis()
    if not redis.set(FILL_LOCK, "1", nx=True, ex=300):
        return {}
    try:
        _reap_orphans()
        wanted = targets(now=now) if enabled() else {}
        for key in redis.scan_iter("inspect:pool:[0-9]*"):
            repository_id = int(key.decode().rsplit(":", 1)[1])
            if repository_id not in wanted:
                _trim(repository_id, keep=0)
        added: dict[int, int] = {}
        for repository_id, target in wanted.items():
            repository = Repository.objects.get(pk=repository_id)
            try:
                snapshot = newest_ready(repository)
            except NoSnapshot:
                continue
            _drop_stale(repository_id, snapshot.pk)
            _trim(repository_id, keep=target)
            while pool_size(repository_id) < target:
                if available_memory_mb() < settings.POOL_MIN_FREE_MB:
                    log.warning("warm pools: host memory below INSPECT_POOL_MIN_FREE_MB")
                    return added
                if not _add(repository, snapshot):
                    break
                added[repository_id] = added.get(repository_id, 0) + 1
        return added
    finally:
        redis.delete(FILL_LOCK)


def _add(repository: Repository, snapshot: Snapshot) -> bool:
    redis = get_redis()
    sandbox_id = "p" + secrets.token_hex(8)
    # A member before it exists: a filler killed while creating it leaves a findable orphan.
    redis.zadd(MEMBERS, {sandbox_id: time.time()})
    # A `start` command that names a secret runs at the claim, so nothing here holds one.
    start_now = not any(entry.secrets for entry in recipe_of(snapshot).start)
    try:
        restored = restore_sandbox(
            repository,
            snapshot=snapshot,
            sandbox_id=sandbox_id,
            limits=Limits(wall_seconds=settings.SNAPSHOT_SETUP_TIMEOUT),  # as the runner's
            sync=False,
            run_start=start_now,
        )
        _sync(restored, repository)
    except Exception as exc:  # a background fill: say why, leave nothing half-made
        log.warning("warm pool of %s: %s", repository.name, exc)
        redis.zrem(MEMBERS, sandbox_id)
        _terminate(sandbox_id)
        return False
    entry = PoolEntry(
        sandbox_id=sandbox_id,
        repository_id=repository.pk,
        snapshot_id=snapshot.pk,
        commit=restored.commit,
        started=start_now,
        egress=as_json(restored.recipe.egress),
    )
    redis.rpush(_entries_key(repository.pk), entry.dumps())
    return True


def _sync(restored: Restored, repository: Repository) -> None:
    """Catch the pool sandbox up with the mirror, unless that would re-run `setup` (which gets
    the repository's secrets): then the claim's sync does it, in the session."""
    if not changed_lockfiles(restored, repository):
        sync_drift(restored, repository)


def _trim(repository_id: int, *, keep: int) -> None:
    redis = get_redis()
    while pool_size(repository_id) > keep:
        raw = redis.rpop(_entries_key(repository_id))
        if raw is None:
            return
        entry = PoolEntry.loads(raw)
        if redis.zrem(MEMBERS, entry.sandbox_id):
            _terminate(entry.sandbox_id)


def _drop_stale(repository_id: int, snapshot_id: int) -> None:
    """Entries of an older snapshot, or whose sandbox died (out of memory, a reboot): their
    place is free for a new one."""
    redis = get_redis()
    for raw in redis.lrange(_entries_key(repository_id), 0, -1):
        entry = PoolEntry.loads(raw)
        stale = entry.snapshot_id != snapshot_id or not _alive(entry.sandbox_id)
        if (
            stale
            and redis.lrem(_entries_key(repository_id), 1, raw)
            and redis.zrem(MEMBERS, entry.sandbox_id)
        ):
            _terminate(entry.sandbox_id)


def _reap_orphans() -> None:
    """Members older than ORPHAN_SECONDS that no pool lists (a filler died making them), and
    members whose sandbox died: terminated and forgotten."""
    redis = get_redis()
    listed = set()
    for key in redis.scan_iter("inspect:pool:[0-9]*"):
        listed.update(PoolEntry.loads(raw).sandbox_id for raw in redis.lrange(key, 0, -1))
    for raw_id in redis.zrangebyscore(MEMBERS, 0, time.time() - ORPHAN_SECONDS):
        sandbox_id = raw_id.decode()
        if sandbox_id not in listed and redis.zrem(MEMBERS, sandbox_id):
            _terminate(sandbox_id)


def drain_pools() -> int:
    """Terminate every unclaimed pool sandbox (the supervisor's Ctrl-C); returns how many."""
    redis = get_redis()
    for key in redis.scan_iter("inspect:pool:[0-9]*"):
        redis.delete(key)
    drained = 0
    for raw_id in redis.zrange(MEMBERS, 0, -1):
        if redis.zrem(MEMBERS, raw_id):
            _terminate(raw_id.decode())
            drained += 1
    return drained


def _alive(sandbox_id: str) -> bool:
    try:
        return sandbox_backend().attach(sandbox_id).is_alive()
    except SandboxGone:
        return False


def _terminate(sandbox_id: str) -> None:
    backend = sandbox_backend()
    try:
        backend.attach(sandbox_id).terminate()
    except SandboxGone:
        destroy = getattr(backend, "destroy", None)
        if destroy is not None:  # the local backend: unmount what a half-made one left
            destroy(sandbox_id)
    except SandboxError as exc:
        log.warning("warm pool: could not terminate %s: %s", sandbox_id, exc)
