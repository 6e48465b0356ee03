"""A turn paused at a small budget goes on when an admin raises it on the budgets page."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from gateway import budgets
from gateway.models import Budget
from sessions.models import Event
from tests.browser.conftest import screenshot
from tests.gateway.budget_fixtures import admit_in_background, running_turn, spend

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def turn(team):
    """The engineer's running turn and its gateway access (tests/gateway/conftest.py's)."""
    with running_turn(team) as access:
        yield access


def test_an_admin_raises_a_budget_in_the_browser_and_the_paused_turn_goes_on(
    login, team, turn, monkeypatch, settings
):
    monkeypatch.setattr(budgets, "POLL_SECONDS", 0.2)
    settings.BUDGET_PAUSE_SECONDS = 120
    team.admin.refresh_from_db()
    budget = Budget.objects.create(
        scope="user", period="day", user=team.engineer, limit_usd=1, updated_by=team.admin
    )
    spend(turn, 1.2)
    pending = admit_in_background(turn)
    deadline = time.monotonic() + 20
    while not Event.objects.filter(session_id=turn.session_id, kind="budget_paused").exists():
        assert time.monotonic() < deadline, "the turn did not pause"
        time.sleep(0.1)

    engineer = login(team.engineer)
    engineer.goto(f"/sessions/{turn.session_id}/")
    paused = engineer.locator(".budget-paused")
    expect(paused).to_contain_text("the daily budget of user engineer is spent")
    expect(paused).to_contain_text("$1.20 of $1.00")
    screenshot(engineer, "budget-paused")

    admin = login(team.admin)
    admin.goto("/budgets/")
    row = admin.locator(f"#budget-{budget.pk}")
    expect(row).to_contain_text("spent: turns pause")
    screenshot(admin, "budgets-spent")
    row.locator("input[name=limit_usd]").fill("lots")
    row.get_by_role("button", name="Change").click()
    expect(row.get_by_role("alert")).to_contain_text("must be a number of dollars")
    row.locator("input[name=limit_usd]").fill("5")
    row.get_by_role("button", name="Change").click()
    expect(admin.locator(f"#budget-{budget.pk} .budget-left-usd")).to_have_text("$3.80")
    assert pending.result(timeout=20) is None  # the paused request goes through
    screenshot(admin, "budgets-raised")
    resumed = Event.objects.get(session_id=turn.session_id, kind="budget_resumed")
    assert "raised to $5.00" in resumed.payload["message"]
    expect(engineer.locator(".budget-resumed")).to_contain_text("raised to $5.00", timeout=15_000)


@pytest.mark.parametrize("url", ["/budgets/", "/repositories/widgets/models/", "/metrics/"])
def test_the_budget_and_model_pages_fit_a_phone(login, team, url):
    team.admin.refresh_from_db()
    Budget.objects.create(scope="repository", period="month", repository=team.repository,
                          limit_usd=250, updated_by=team.admin)  # fmt: skip
    spend(None, 3.5, user=team.engineer, repository=team.repository, runtime="codex")
    page = login(team.admin)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.goto(url).status == 200
    if url == "/metrics/":  # the spend fragment arrives after the page
        expect(page.locator("#metrics-spend .spend-total")).to_have_text("$3.50")
    else:
        expect(page.get_by_role("button").first).to_be_visible()
    screenshot(page, "gateway" + url.replace("/", "-").rstrip("-") + "-phone")
    assert errors == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_bad_model_name_is_shown_in_the_form_and_a_good_list_is_saved(login, team):
    page = login(team.admin)
    page.goto("/repositories/widgets/models/")
    page.fill("#models-text", "claude-sonnet-*\nbad name!")
    page.get_by_role("button", name="Save list").click()
    expect(page.locator("#models-error")).to_contain_text("'name!' is not a model name")
    page.fill("#models-text", "claude-sonnet-*\ngpt-4.1")
    page.get_by_role("button", name="Save list").click()
    expect(page.get_by_role("status")).to_contain_text("Saved")
    team.repository.refresh_from_db()
    assert team.repository.allowed_models == ["claude-sonnet-*", "gpt-4.1"]
