"""Shared fixtures: real PostgreSQL/SQLite and Redis, and a ready-made permission matrix.

Every repository-scoped test gets an engineer, a reviewer, a manager, an admin and an outsider
(a user who is a member of another repository only), as healthchecks' BaseTestCase does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.conf import settings


def pytest_configure(config) -> None:
    # Hashing passwords at full strength costs ~0.3 s per user; tests only need it to work.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.STATIC_ROOT.mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="session", autouse=True)
def redis_server():
    """The suite runs against REDIS_URL when set, else against the embedded Redis (started once)."""
    if settings.EMBEDDED_REDIS:
        from inspect_web.embedded_redis import ensure_embedded_redis

        return ensure_embedded_redis(settings.DATA_DIR).url
    return settings.REDIS_URL


@dataclass
class Team:
    repository: object
    other_repository: object
    engineer: object
    reviewer: object
    manager: object
    admin: object
    outsider: object


@pytest.fixture
def team(db) -> Team:
    from django.contrib.auth import get_user_model

    from snapshots.models import Membership, Repository, Role

    users = get_user_model()
    repository = Repository.objects.create(name="widgets", url="/srv/git/widgets.git")
    other = Repository.objects.create(name="gadgets", url="/srv/git/gadgets.git")
    made = {}
    for role in Role:
        user = users.objects.create_user(role.value, password="correct horse battery staple")
        Membership.objects.create(user=user, repository=repository, role=role)
        made[role.value] = user
    outsider = users.objects.create_user("outsider", password="correct horse battery staple")
    Membership.objects.create(user=outsider, repository=other, role=Role.ADMIN)
    return Team(repository=repository, other_repository=other, outsider=outsider, **made)
