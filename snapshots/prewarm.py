"""Pre-warmed sandboxes: restored for (user, repository) while the user types, claimed by
their next session there, terminated if unclaimed within INSPECT_PREWARM_SECONDS."""

from __future__ import annotations

import time

from django.conf import settings

from inspect_web.redis_client import get_redis
from snapshots.backends import sandbox_backend
from snapshots.models import Repository
from snapshots.restore import restore_sandbox
from snapshots.sandbox import Sandbox, SandboxGone

EXPIRY_SET = "inspect:prewarm:expiry"


def _key(user_id: int, repository: Repository) -> str:
    return f"inspect:prewarm:{user_id}:{repository.pk}"


def prewarm_sandbox(user_id: int, repository: Repository) -> str:
    """Restore a sandbox ahead of a prompt (idempotent while one is waiting); returns its id."""
    redis = get_redis()
    key = _key(user_id, repository)
    existing = redis.get(key)
    if existing:
        return existing.decode()
    restored = restore_sandbox(repository)
    sandbox_id = restored.sandbox.id
    if not redis.set(key, sandbox_id, nx=True, ex=settings.PREWARM_SECONDS):
        restored.sandbox.terminate()  # another request won the race
        return redis.get(key).decode()
    redis.zadd(EXPIRY_SET, {sandbox_id: time.time() + settings.PREWARM_SECONDS})
    return sandbox_id


def claim_prewarmed(user_id: int, repository: Repository) -> Sandbox | None:
    """The user's waiting sandbox for `repository`, now theirs to keep; None if there is none."""
    redis = get_redis()
    sandbox_id = redis.getdel(_key(user_id, repository))
    if not sandbox_id:
        return None
    redis.zrem(EXPIRY_SET, sandbox_id)
    try:
        return sandbox_backend().attach(sandbox_id.decode())
    except SandboxGone:
        return None


def reap_prewarmed_sandboxes() -> int:
    """Terminate pre-warmed sandboxes nobody claimed in time; returns how many."""
    redis = get_redis()
    expired = redis.zrangebyscore(EXPIRY_SET, 0, time.time())
    reaped = 0
    for sandbox_id in expired:
        if redis.zrem(EXPIRY_SET, sandbox_id):  # only one reaper acts on each
            try:
                sandbox_backend().attach(sandbox_id.decode()).terminate()
                reaped += 1
            except SandboxGone:
                pass
    return reaped
