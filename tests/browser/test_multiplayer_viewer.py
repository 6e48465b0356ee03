"""Two people watch one session in two browsers."""

import pytest
from playwright.sync_api import expect

from sessions.events import append_events
from sessions.models import Session
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def session(team):
    return Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix login", branch="main"
    )


def log_seqs(page) -> list[int]:
    return [
        int(s)
        for s in page.eval_on_selector_all("#log-events > li", "els => els.map(e => e.dataset.seq)")
    ]


def test_two_viewers_see_the_same_live_events_and_each_other(login, team, session):
    alice = login(team.engineer)
    bob = login(team.reviewer)
    for page in (alice, bob):
        page.goto(session.get_absolute_url())
    expect(alice.locator("#presence")).to_contain_text("reviewer", timeout=10_000)
    expect(bob.locator("#presence")).to_contain_text("engineer", timeout=10_000)

    append_events(
        session.pk, [("output", {"stream": "stdout", "text": f"step {i}"}) for i in range(1, 31)]
    )
    append_events(session.pk, [("agent_message", {"text": "<b>done</b> & dusted"})])
    for page in (alice, bob):
        expect(page.locator("#log-events > li")).to_have_count(31, timeout=10_000)
    assert log_seqs(alice) == log_seqs(bob) == list(range(1, 32))
    # Agent output is text, not markup.
    expect(alice.locator("#event-31")).to_contain_text("<b>done</b> & dusted")
    assert alice.locator("#event-31 b").count() == 0
    screenshot(alice, "session-viewer")

    bob.close()
    expect(alice.locator("#presence")).not_to_contain_text("reviewer", timeout=10_000)


def test_the_page_reconnects_after_the_server_drops_and_resumes_without_gap_or_duplicate(
    login, team, session, live_server_url, tmp_path
):
    from tests.sessions.stream.conftest import running_daphne

    base, server = live_server_url
    page = login(team.engineer)
    page.goto(session.get_absolute_url())
    append_events(
        session.pk, [("output", {"stream": "stdout", "text": f"a{i}"}) for i in range(10)]
    )
    expect(page.locator("#log-events > li")).to_have_count(10, timeout=10_000)

    server.process.kill()  # the websocket drops abnormally
    server.process.wait()
    append_events(
        session.pk, [("output", {"stream": "stdout", "text": f"b{i}"}) for i in range(10)]
    )
    port = server.port
    with running_daphne(tmp_path / "second.log", port=port) as second:
        assert second.port == port
        expect(page.locator("#log-events > li")).to_have_count(20, timeout=20_000)
        append_events(session.pk, [("output", {"stream": "stdout", "text": "c"})])
        expect(page.locator("#log-events > li")).to_have_count(21, timeout=10_000)
    assert log_seqs(page) == list(range(1, 22))


def test_a_non_member_gets_the_404_page_and_no_websocket(login, team, session):
    page = login(team.outsider)
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    response = page.goto(session.get_absolute_url())
    assert response.status == 404
    expect(page.locator("h1")).to_have_text("Not found")
    page.wait_for_timeout(500)
    assert sockets == []
