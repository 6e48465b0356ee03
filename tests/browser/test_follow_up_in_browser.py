"""B queues a follow-up while A watches a running turn."""

import pytest
from playwright.sync_api import expect

from sessions import services
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The first turn outlasts B's queueing by a wide margin, so A can see the prompt wait even on a
# loaded machine; the follow-up is quick.
AGENT = (
    'echo "turn: $INSPECT_PROMPT by $INSPECT_AUTHOR"; '
    'if [ "$INSPECT_PROMPT" = first ]; then sleep 15; fi'
)


def test_a_follow_up_from_b_is_seen_by_a_queued_then_run_attributed(
    login, team, ready_repo, start_celery
):
    start_celery("worker")
    session = services.session_create(
        repository=ready_repo, creator=team.engineer, prompt="first", agent_command=AGENT
    )
    alice = login(team.engineer)
    bob = login(team.admin)
    alice.goto(session.get_absolute_url())
    bob.goto(session.get_absolute_url())
    expect(alice.locator("#session-state")).to_have_text("running", timeout=30_000)

    bob.fill("#prompt-text", "second, please")
    bob.click("text=Queue prompt")
    expect(bob.locator(".messages")).to_contain_text("Prompt queued")
    # A sees B's prompt arrive in the live log, attributed, before it runs ...
    expect(alice.locator("#log-events")).to_contain_text("admin asked (prompt 2)", timeout=10_000)
    queued = alice.locator("#prompts li.prompt-queued")
    expect(queued).to_contain_text("admin", timeout=10_000)
    expect(queued).to_contain_text("second, please")
    # ... then run, attributed to B.
    expect(alice.locator("#log-events")).to_contain_text(
        "turn: second, please by admin", timeout=60_000
    )
    expect(alice.locator("#session-state")).to_have_text("idle", timeout=60_000)
    screenshot(alice, "session-after-follow-up")


@pytest.mark.parametrize(
    "name",
    ["home", "sessions:list", "sessions:new", "snapshots:list", "approvals:inbox", "metrics"],
)
def test_each_main_page_renders_in_the_browser(login, team, ready_repo, name):
    from django.urls import reverse

    page = login(team.admin)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    response = page.goto(reverse(name))
    assert response.status == 200
    expect(page.locator("nav")).to_be_visible()
    screenshot(page, name.replace(":", "-"))
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    screenshot(page, name.replace(":", "-") + "-phone")
    assert errors == []
    # Nothing wider than the phone: the page never scrolls sideways.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
