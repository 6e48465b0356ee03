"""API fixtures: a token per team member and DRF clients that send it."""

from __future__ import annotations

import pytest


@pytest.fixture
def token_for(db):
    from api.tokens import token_create

    def make(user, name: str = "tests", days: int = 30) -> str:
        return token_create(user=user, name=name, expires_in_days=days)[1]

    return make


@pytest.fixture
def api(token_for):
    """`api(user)`: an APIClient authenticated with a fresh token of `user`."""
    from rest_framework.test import APIClient

    def client_for(user) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(user)}")
        return client

    return client_for


@pytest.fixture(autouse=True)
def forget_stop_requests(redis_server):
    """Session ids restart at 1 in every test database but Redis outlives it: a stop asked for
    in one test must not stop another test's session 1."""
    yield
    import redis

    client = redis.Redis.from_url(redis_server)
    for key in client.scan_iter("inspect:stop:*"):
        client.delete(key)
    client.close()
