"""Liveness for the supervisor and load balancers: the database and Redis both answer."""

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse


def healthz(request: HttpRequest) -> JsonResponse:
    status = {"database": "ok", "redis": "ok"}
    try:
        connection.ensure_connection()
    except Exception as exc:  # any driver error means "not healthy", reported, not raised
        status["database"] = f"error: {exc.__class__.__name__}"
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
    except (redis.RedisError, OSError) as exc:
        status["redis"] = f"error: {exc.__class__.__name__}"
    healthy = all(value == "ok" for value in status.values())
    return JsonResponse(status, status=200 if healthy else 503)
