"""Budget tests' fixtures: a running turn with gateway access, and model requests that cost money
(imported by the test modules that use them, beside the gateway's other fixtures)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from django.db import connections

from gateway import budgets
from gateway.models import ModelRequest
from inspect_web.redis_client import get_redis
from sessions import model_access
from sessions.models import ModelAccess, Prompt, Session


@pytest.fixture(autouse=True)
def admin_is_site_admin(request):
    """The team's admin is the site's superuser in the database; the object says so too."""
    if "team" in request.fixturenames:
        request.getfixturevalue("team").admin.refresh_from_db()


T = TypeVar("T")


@contextmanager
def running_turn(team) -> Iterator[ModelAccess]:
    """A session of the team's repository with its first turn running: its ModelAccess."""
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    prompt = Prompt.objects.create(session=session, author=team.engineer, text="go", order=1)
    token = model_access.mint(session, prompt, "claude_code")
    access = model_access.active(token)
    get_redis().delete(budgets.pause_key(access))
    budgets.clear_cache()
    try:
        yield access
    finally:
        get_redis().delete(budgets.pause_key(access))
        budgets.clear_cache()


@pytest.fixture
def turn(team):
    with running_turn(team) as access:
        yield access


def spend(access: ModelAccess | None, usd: float, *, user=None, repository=None, **extra):
    """One finished model request of `usd` (of `access`'s turn, or of the user/repository)."""
    return ModelRequest.objects.create(
        access=access,
        session_id=access.session_id if access else None,
        prompt_id=access.prompt_id if access else None,
        user=user if user is not None else (access.user if access else None),
        repository=repository
        if repository is not None
        else (access.repository if access else None),
        runtime=extra.pop("runtime", access.runtime if access else "builtin"),
        provider=extra.pop("provider", "anthropic"),
        endpoint="messages",
        model=extra.pop("model", "claude-sonnet-4-5"),
        status=200,
        outcome=ModelRequest.Outcome.OK,
        cost_usd=usd,
        request_sha256="0" * 64,
        response_sha256="0" * 64,
        **extra,
    )


_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="admit")


def in_event_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on an event loop of its own, as the gateway runs admit(). Its database
    work runs in one executor thread whose connection is closed after, so the test database can
    be dropped."""
    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="admit-db")
    loop.set_default_executor(executor)
    try:
        return loop.run_until_complete(coroutine)
    finally:
        executor.submit(connections.close_all).result()
        loop.close()
        executor.shutdown()


def admit_now(access: ModelAccess, model: str = "claude-sonnet-4-5") -> budgets.Refusal | None:
    return in_event_loop(budgets.admit(access, model))


def admit_in_background(access: ModelAccess, model: str = "claude-sonnet-4-5") -> Future:
    """admit_now() in another thread, while the test (an admin) acts in this one."""
    return _pool.submit(admit_now, access, model)
