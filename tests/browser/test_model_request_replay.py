"""In a real browser: from the session page a member follows the link to the session's model
requests, opens one and reads what the agent was told and answered; the usage event in the live
log links to the same page."""

from __future__ import annotations

import json

from gateway.metering import Exchange, record
from sessions import model_access
from sessions.models import Prompt, Session
from tests.browser.conftest import screenshot

ASKED = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "add a greeting to README.md"}],
}
ANSWERED = {
    "id": "msg_replay_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Added the greeting."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 1000},
}


def test_a_member_replays_a_model_request_from_the_session_page(team, login):
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="greet", branch="inspect/greet"
    )
    prompt = Prompt.objects.create(session=session, author=team.engineer, text="greet", order=1)
    token = model_access.mint(session, prompt, "claude-code")
    row = record(
        Exchange(
            access=model_access.active(token), provider="anthropic", endpoint="messages",
            model="claude-sonnet-4-5", stream=False, status=200, outcome="ok",
            request_body=json.dumps(ASKED).encode(), response_body=json.dumps(ANSWERED).encode(),
            input_tokens=2200, output_tokens=80, cached_tokens=1000, latency_ms=850.0,
        )
    )  # fmt: skip

    page = login(team.engineer)
    page.goto(f"/sessions/{session.pk}/")
    log_link = page.locator(
        f'#log-events a[href="/sessions/{session.pk}/model-requests/{row.pk}/"]'
    )
    assert log_link.count() == 1
    assert page.locator("#model-cost").inner_text().startswith("Model cost $0.0051")
    # Another request metered while the page is open: its log item and the cost arrive live.
    later = record(
        Exchange(
            access=model_access.active(token), provider="anthropic", endpoint="messages",
            model="claude-sonnet-4-5", stream=True, status=200, outcome="ok",
            request_body=b"{}", response_body=b"", input_tokens=1000, output_tokens=100,
        )
    )  # fmt: skip
    page.locator(f'#log-events a[href$="/model-requests/{later.pk}/"]').wait_for()
    page.wait_for_function(
        "document.querySelector('#model-cost').innerText.startsWith('Model cost $0.0096')"
    )
    screenshot(page, "session-with-a-model-request")
    page.get_by_role("link", name="replay every model request").click()
    page.wait_for_url(f"**/sessions/{session.pk}/model-requests/")
    assert page.get_by_role("cell", name="claude-code").count() == 2
    screenshot(page, "model-requests")

    page.locator(f'a[href="/sessions/{session.pk}/model-requests/{row.pk}/"]').click()
    page.wait_for_url(f"**/model-requests/{row.pk}/")
    request_text = page.locator("pre.log").first.inner_text()
    assert '"content": "add a greeting to README.md"' in request_text
    assert '"text": "Added the greeting."' in page.locator("pre.log").nth(1).inner_text()
    screenshot(page, "model-request")

    # Someone of another repository only: the same address is not found.
    outsider = login(team.outsider)
    response = outsider.goto(f"/sessions/{session.pk}/model-requests/{row.pk}/")
    assert response.status == 404
