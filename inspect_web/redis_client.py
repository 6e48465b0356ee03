"""One Redis client per process (a forked Celery child makes its own)."""

from __future__ import annotations

import os

import redis
from django.conf import settings

_clients: dict[int, redis.Redis] = {}


def get_redis() -> redis.Redis:
    pid = os.getpid()
    client = _clients.get(pid)
    if client is None:
        client = redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)
        _clients.clear()  # drop a parent's client after fork
        _clients[pid] = client
    return client
