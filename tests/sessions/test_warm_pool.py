"""Warm pools (sessions/warm_pool.py): real sandboxes, real Redis, real PostgreSQL."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from inspect_web.redis_client import get_redis
from sessions import warm_pool
from sessions.models import Event, Session
from snapshots.backends import sandbox_backend
from snapshots.models import Snapshot

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]


@pytest.fixture(autouse=True)
def empty_pools(settings):
    """Each test starts and ends with no pool sandbox (the Redis db is shared by the run)."""
    settings.POOL_MAX_SANDBOXES = 8
    settings.POOL_MAX_PER_REPOSITORY = 4
    settings.POOL_MIN_PER_REPOSITORY = 0
    warm_pool.drain_pools()
    yield
    warm_pool.drain_pools()


def entries(repository) -> list[warm_pool.PoolEntry]:
    key = f"inspect:pool:{repository.pk}"
    return [warm_pool.PoolEntry.loads(raw) for raw in get_redis().lrange(key, 0, -1)]


def test_a_session_claims_a_pool_sandbox_and_catches_up_only_the_drift(
    settings, ready_repo, create_session
):
    settings.POOL_MIN_PER_REPOSITORY = 1
    assert warm_pool.fill_pools() == {ready_repo.pk: 1}
    [entry] = entries(ready_repo)
    snapshot = Snapshot.objects.get(repository=ready_repo, state="ready")
    assert (entry.snapshot_id, entry.commit, entry.started) == (snapshot.pk, snapshot.commit, True)
    ready_repo.upstream.commit({"NEWS.md": "new\n"}, "after the snapshot")

    code, summary, err = create_session(
        "--prompt", "look", "--agent-command", "cat NEWS.md", "--inline"
    )

    assert code == 0, err
    session = Session.objects.get(pk=summary["id"])
    assert session.sandbox_id == entry.sandbox_id
    assert session.timings["pooled"] is True
    assert session.drift == {"commits": 1, "files": 1, "stale": False}
    outputs = Event.objects.filter(session=session, kind="output").values_list(
        "payload__text", flat=True
    )
    assert "new" in list(outputs)
    assert entries(ready_repo) == []  # claimed once; the refill is queued, not run here
    assert not get_redis().zscore(warm_pool.MEMBERS, entry.sandbox_id)


def test_the_pool_sandbox_is_synced_when_it_is_made(settings, ready_repo, create_session):
    ready_repo.upstream.commit({"LATER.md": "later\n"}, "before the fill")
    create_session("--prompt", "fetch", "--agent-command", "true", "--inline")  # mirror fetched
    settings.POOL_MIN_PER_REPOSITORY = 1
    warm_pool.fill_pools()
    [entry] = entries(ready_repo)
    sandbox = sandbox_backend().attach(entry.sandbox_id)
    assert sandbox.read_file("LATER.md") == b"later\n"
    assert entry.commit == ready_repo.upstream.git("rev-parse", "HEAD").strip()


def test_pool_size_follows_the_sessions_of_this_hour_of_day(settings, ready_repo, team):
    now = timezone.now().replace(minute=30)
    for day in range(1, 15):  # 3 sessions a day at this hour for two weeks, 1 at another hour
        for k in range(3):
            Session.objects.create(
                repository=ready_repo,
                creator=team.engineer,
                title="t",
                created_at=now - timedelta(days=day, minutes=k),
            )
        Session.objects.create(
            repository=ready_repo,
            creator=team.engineer,
            title="t",
            created_at=now - timedelta(days=day, hours=6),
        )
    assert warm_pool.demand(ready_repo, now=now) == 3
    assert warm_pool.demand(ready_repo, now=now + timedelta(hours=12)) == 0
    settings.POOL_MAX_PER_REPOSITORY = 2
    assert warm_pool.demand(ready_repo, now=now) == 2
    settings.POOL_MAX_SANDBOXES = 1  # the site-wide cap wins
    assert warm_pool.targets(now=now) == {ready_repo.pk: 1}
    settings.POOL_MAX_SANDBOXES = 0  # pools off: everything is drained
    assert warm_pool.fill_pools(now=now) == {}
    assert entries(ready_repo) == []


def test_no_pool_sandbox_is_made_when_memory_is_short(settings, ready_repo):
    settings.POOL_MIN_PER_REPOSITORY = 2
    settings.POOL_MIN_FREE_MB = warm_pool.available_memory_mb() + 10_000
    assert warm_pool.fill_pools() == {}
    assert entries(ready_repo) == []


def test_a_new_snapshot_replaces_the_pool(settings, ready_repo, inspect_cli):
    settings.POOL_MIN_PER_REPOSITORY = 1
    warm_pool.fill_pools()
    [old] = entries(ready_repo)
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--full", "--json")
    assert code == 0, err
    warm_pool.fill_pools()
    [new] = entries(ready_repo)
    assert new.snapshot_id != old.snapshot_id
    assert old.sandbox_id not in sandbox_backend().list_sandboxes()


def test_drain_and_orphans_leave_no_sandbox_and_no_mount(settings, ready_repo):
    settings.POOL_MIN_PER_REPOSITORY = 2
    warm_pool.fill_pools()
    made = [e.sandbox_id for e in entries(ready_repo)]
    assert len(made) == 2
    backend = sandbox_backend()
    mounts = [backend.mount_base / sandbox_id for sandbox_id in made]
    assert all(m.is_dir() for m in mounts)
    # A filler killed half-way: registered, never listed, old.
    get_redis().zadd(warm_pool.MEMBERS, {"porphan0000000000": time.time() - 3600})
    warm_pool.fill_pools()
    assert get_redis().zscore(warm_pool.MEMBERS, "porphan0000000000") is None

    assert warm_pool.drain_pools() == 2

    alive = backend.list_sandboxes()
    assert not set(made) & set(alive)
    assert not any(m.exists() for m in mounts)
    assert not any(sandbox_id in Path("/proc/mounts").read_text() for sandbox_id in made)


def test_a_failed_early_fetch_fails_the_turn_with_the_mirrors_reason(ready_repo, create_session):
    """The first turn fetches the mirror while its sandbox is claimed or restored; a fetch that
    fails still fails the turn, saying why, and leaves no sandbox running."""
    before = set(sandbox_backend().list_sandboxes())
    ready_repo.upstream.path.rename(ready_repo.upstream.path.with_name("gone"))

    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")

    session = Session.objects.get(pk=summary["id"])
    assert session.state == "failed"
    assert "upstream" in session.error or "repository" in session.error, session.error
    assert set(sandbox_backend().list_sandboxes()) <= before  # none left by the failed turn


def test_a_pool_sandbox_that_died_is_replaced(settings, ready_repo):
    settings.POOL_MIN_PER_REPOSITORY = 1
    warm_pool.fill_pools()
    [dead] = entries(ready_repo)
    sandbox = sandbox_backend().attach(dead.sandbox_id)
    os.kill(sandbox.state["init_pid"], 9)  # as the kernel's OOM killer would

    assert warm_pool.fill_pools() == {ready_repo.pk: 1}

    [fresh] = entries(ready_repo)
    assert fresh.sandbox_id != dead.sandbox_id
    assert not (sandbox_backend().mount_base / dead.sandbox_id).exists()
