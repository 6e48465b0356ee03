"""admit(): a request goes while its budgets last; a spent budget pauses the turn until an admin
raises it, or refuses it with a 429 naming the budget once BUDGET_PAUSE_SECONDS pass."""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal

import pytest
import redis
from django.db import connection
from django.utils import timezone

from gateway import budgets
from gateway.budget_admin import budget_remove, budget_set
from gateway.models import Budget, ModelRequest
from inspect_web.redis_client import get_redis
from sessions import model_access
from sessions.models import Event
from tests.gateway.budget_fixtures import admit_in_background, admit_now, in_event_loop, spend

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch, settings):
    monkeypatch.setattr(budgets, "POLL_SECONDS", 0.1)
    settings.BUDGET_PAUSE_SECONDS = 30


def events(access, kind):
    return [e.payload for e in Event.objects.filter(session_id=access.session_id, kind=kind)]


def wait_for(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_request_within_every_budget_goes(team, turn):
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="5")
    budget_set(by=team.admin, scope="site", period="month", target="", limit_usd="100")
    spend(turn, 4.99)
    assert admit_now(turn) is None
    assert events(turn, "budget_paused") == []


def test_spend_counts_this_utc_day_only_for_a_daily_budget(team, turn):
    budget_set(by=team.admin, scope="repository", period="day", target="widgets", limit_usd="1")
    old = spend(turn, 50)
    old.created_at = budgets.period_start("day") - timedelta(seconds=1)
    old.save()
    spend(None, 5, user=team.outsider, repository=team.other_repository)  # another repository
    assert budgets.first_spent(turn.user_id, turn.repository_id, fresh=True) is None
    spend(turn, 1.0)
    spent = budgets.first_spent(turn.user_id, turn.repository_id, fresh=True)
    assert spent.limit.name == "the daily budget of repository widgets"
    assert spent.spent_usd == pytest.approx(1.0)
    assert timezone.now() >= budgets.period_start("month")


def test_a_spent_budget_pauses_the_turn_until_an_admin_raises_it(team, turn):
    budget = budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="2")
    spend(turn, 2.5)
    pending = admit_in_background(turn)
    wait_for(lambda: events(turn, "budget_paused"))
    (paused,) = events(turn, "budget_paused")
    assert paused["budget"] == "the daily budget of user engineer"
    assert (paused["spent_usd"], paused["limit_usd"], paused["left_usd"]) == (2.5, 2.0, 0.0)
    assert paused["raise_at"] == "/budgets/" and "/budgets/" in paused["message"]
    assert paused["turn"] == 1
    time.sleep(0.5)
    assert not pending.done()  # still waiting
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="10")
    assert pending.result(timeout=15) is None
    (resumed,) = events(turn, "budget_resumed")
    assert resumed["budget"] == "the daily budget of user engineer"
    assert resumed["limit_usd"] == 10.0 and "raised to $10.00" in resumed["message"]
    assert Budget.objects.get(pk=budget.pk).limit_usd == Decimal("10")


def test_removing_the_budget_resumes_the_turn(team, turn):
    budget = budget_set(by=team.admin, scope="site", period="month", target="", limit_usd="1")
    spend(turn, 1)
    pending = admit_in_background(turn)
    wait_for(lambda: events(turn, "budget_paused"))
    budget_remove(by=team.admin, budget=budget)
    assert pending.result(timeout=15) is None
    (resumed,) = events(turn, "budget_resumed")
    assert resumed["limit_usd"] is None and "removed" in resumed["message"]


def test_a_pause_that_times_out_is_a_429_naming_the_budget(team, turn, settings):
    settings.BUDGET_PAUSE_SECONDS = 1
    budget_set(by=team.admin, scope="repository", period="month", target="widgets", limit_usd="3")
    spend(turn, 3)
    started = time.monotonic()
    refusal = admit_in_background(turn).result(timeout=15)
    assert time.monotonic() - started >= 1
    assert (refusal.status, refusal.kind, refusal.outcome) == (
        429,
        "rate_limit_error",
        "refused_budget",
    )
    assert "the monthly budget of repository widgets" in refusal.message
    assert "$3.00 of $3.00" in refusal.message and "/budgets/" in refusal.message
    (error,) = events(turn, "error")
    assert error["phase"] == "budget"
    # The runtimes retry a 429: the turn's next request is refused at once, not paused again.
    started = time.monotonic()
    again = admit_now(turn)
    assert again.status == 429 and time.monotonic() - started < 0.9
    assert len(events(turn, "budget_paused")) == 1
    # The turn run again (a new token for the same prompt) pauses, and says so, afresh.
    retry = model_access.active(model_access.mint(turn.session, turn.prompt, "claude_code"))
    assert admit_now(retry).status == 429
    assert len(events(turn, "budget_paused")) == 2
    get_redis().delete(budgets.pause_key(retry))


def test_many_waiting_requests_make_one_paused_event_and_one_resumed(team, turn):
    budget_set(by=team.admin, scope="user", period="month", target="engineer", limit_usd="1")
    spend(turn, 1.5)
    pending = [admit_in_background(turn) for _ in range(5)]
    wait_for(lambda: events(turn, "budget_paused"))
    time.sleep(0.5)  # every request is waiting now
    budget_set(by=team.admin, scope="user", period="month", target="engineer", limit_usd="5")
    assert [p.result(timeout=15) for p in pending] == [None] * 5
    assert len(events(turn, "budget_paused")) == 1
    assert len(events(turn, "budget_resumed")) == 1


def test_a_turn_stopped_while_paused_gets_a_401(team, turn):
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="0")
    pending = admit_in_background(turn)  # a zero budget is spent from the start
    wait_for(lambda: events(turn, "budget_paused"))
    model_access.revoke(turn.session_id)  # the user stopped the turn
    refusal = pending.result(timeout=15)
    assert refusal.status == 401 and refusal.kind == "authentication_error"
    assert "start a new turn" in refusal.message
    assert events(turn, "budget_resumed") == []


def test_an_uncached_check_is_fast_with_a_month_of_requests(team, turn):
    """The figure quoted in docs/model-gateway.md: p99 of an uncached check with every scope's
    budget set and a busy month of requests (60,000 rows)."""
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="1000000")
    budget_set(
        by=team.admin, scope="repository", period="month", target="widgets", limit_usd="1000000"
    )
    budget_set(by=team.admin, scope="site", period="month", target="", limit_usd="1000000")
    template = spend(turn, 0.01)
    rows = []
    start = budgets.period_start("month")
    elapsed = timedelta(seconds=time.time() - start.timestamp())
    for i in range(60_000):
        rows.append(ModelRequest(
            user_id=(team.engineer, team.reviewer, team.outsider)[i % 3].pk,
            repository_id=(team.repository, team.other_repository)[i % 2].pk,
            runtime="builtin", provider="openai", endpoint="responses", model="gpt-4.1",
            status=200, outcome="ok", cost_usd=0.001, request_sha256=template.request_sha256,
            response_sha256=template.response_sha256,
            created_at=start + elapsed * (i / 60_000),
        ))  # fmt: skip
    ModelRequest.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE gateway_modelrequest")
    timings = []
    for _ in range(100):
        budgets.clear_cache()
        began = time.perf_counter()
        assert budgets.first_spent(turn.user_id, turn.repository_id) is None
        timings.append((time.perf_counter() - began) * 1000)
    timings.sort()
    p50, p99 = timings[49], timings[98]
    print(f"uncached budget check, 3 budgets, 60,000 requests: p50 {p50:.1f} ms, p99 {p99:.1f} ms")

    async def cached_admits() -> float:
        began = time.perf_counter()
        for _ in range(1000):
            assert await budgets.admit(turn, "gpt-4.1") is None
        return (time.perf_counter() - began) / 1000 * 1000

    per_admit = in_event_loop(cached_admits())
    print(f"admit() within its budgets, cached: {per_admit:.3f} ms")
    assert p99 < 100


def test_without_redis_the_pause_is_still_shown_and_still_ends(team, turn, monkeypatch):
    class Down:
        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise redis.ConnectionError("Redis is down")

            return fail

    monkeypatch.setattr(budgets, "get_redis", Down)
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="1")
    spend(turn, 1)
    pending = admit_in_background(turn)
    wait_for(lambda: events(turn, "budget_paused"))
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="2")
    assert pending.result(timeout=15) is None
