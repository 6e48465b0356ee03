"""The pull-request panel that arrives over the websocket (rendered without the viewer's request,
so without a CSRF field) still asks for the merge when its button is pressed."""

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from sessions import services
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_request_merge_from_a_panel_rendered_live(login, team, ready_repo, start_celery, settings):
    settings.AUTO_PULL_REQUEST = True  # before the worker starts: it reads it from its env
    start_celery("worker")
    page = login(team.engineer)
    session = services.session_create(
        repository=ready_repo,
        creator=team.engineer,
        prompt="add a greeting",
        agent_command="sleep 2; echo hello > greeting.txt",
    )
    # Opened before the turn ends: the panel with the button comes in over the websocket.
    page.goto(session.get_absolute_url())
    expect(page.locator("#pull-request .empty")).to_be_visible()
    button = page.locator("#pull-request button", has_text="Request merge")
    expect(button).to_be_visible(timeout=60_000)
    button.click()
    expect(page.locator(".messages")).to_contain_text("Merge requested", timeout=10_000)
    screenshot(page, "merge-requested-from-live-panel")
    request = ApprovalRequest.objects.get(session=session)
    assert request.requested_by == team.engineer
