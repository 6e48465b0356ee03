"""Budgets in the gateway process: a request of a turn whose budget is spent waits (the
provider sees nothing) until an admin raises the budget, or gets a 429 naming it."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("gateway.server")  # the gateway process (its fixtures: tests/gateway/conftest)

from gateway.budget_admin import budget_set  # noqa: E402
from gateway.models import ModelRequest  # noqa: E402
from sessions.models import Event  # noqa: E402
from tests.gateway.budget_fixtures import spend  # noqa: E402
from tests.gateway.conftest import ANTHROPIC_HEADERS, anthropic_body, wait_for_request  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def quick_gateway(start_gateway, upstream):
    """A gateway whose turns wait at most 4 s for a budget to be raised."""
    return start_gateway(upstream.url, upstream.openai_url, INSPECT_BUDGET_PAUSE_SECONDS="4")


def _paused(session) -> bool:
    return Event.objects.filter(session=session, kind="budget_paused").exists()


def test_a_paused_request_goes_through_once_an_admin_raises_the_budget(
    quick_gateway, fresh_upstream, mint, team
):
    token, session = mint()
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="0.5")
    spend(None, 0.5, user=team.engineer, repository=team.repository)
    answer = {}

    def call() -> None:
        with quick_gateway.client(token) as client:
            answer["response"] = client.post(
                "/anthropic/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
            )

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 10
    while not _paused(session):
        assert time.monotonic() < deadline, quick_gateway.output()
        time.sleep(0.05)
    assert "response" not in answer and fresh_upstream.requests == []  # waiting, nothing sent
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="5")
    caller.join(timeout=15)
    assert answer["response"].status_code == 200, answer["response"].text
    assert len(fresh_upstream.requests) == 1
    assert Event.objects.filter(session=session, kind="budget_resumed").count() == 1
    (row,) = wait_for_request(session)
    assert row.outcome == ModelRequest.Outcome.OK


def test_a_pause_nobody_ends_is_a_429_naming_the_budget(quick_gateway, fresh_upstream, mint, team):
    token, session = mint()
    budget_set(by=team.admin, scope="repository", period="month", target="widgets", limit_usd="1")
    spend(None, 2, user=team.reviewer, repository=team.repository)
    began = time.monotonic()
    with quick_gateway.client(token) as client:
        response = client.post(
            "/anthropic/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
    assert time.monotonic() - began >= 4
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["type"] == "rate_limit_error"
    assert "the monthly budget of repository widgets" in error["message"]
    assert "/budgets/" in error["message"]
    assert fresh_upstream.requests == []
    (row,) = wait_for_request(session)
    assert (row.status, row.outcome) == (429, ModelRequest.Outcome.REFUSED_BUDGET)
