"""The live log follows new events until the reader scrolls up; then "Jump to live" appears and
takes them back (by keyboard here), and the log follows again."""

import pytest
from playwright.sync_api import expect

from sessions.events import append_events
from sessions.models import Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AT_BOTTOM = "b => b.scrollHeight - b.scrollTop - b.clientHeight < 4"


def output(first: int, count: int) -> list:
    return [
        ("output", {"stream": "stdout", "text": f"line {i}"}) for i in range(first, first + count)
    ]


def test_scrolling_up_shows_jump_to_live_which_returns_to_the_newest_event(login, team):
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Long log", branch="main"
    )
    page = login(team.engineer)
    page.goto(session.get_absolute_url())
    expect(page.locator("#presence")).to_contain_text("engineer", timeout=10_000)
    log, jump = page.locator("#log"), page.locator("#jump-live")

    append_events(session.pk, output(1, 150))
    expect(page.locator("#log-events > li")).to_have_count(150, timeout=10_000)
    assert log.evaluate(AT_BOTTOM), "the log follows new events"
    expect(jump).to_be_hidden()

    log.evaluate("b => { b.scrollTop = 0; }")
    expect(jump).to_be_visible()  # at once, before anything new arrives
    append_events(session.pk, output(151, 5))
    expect(page.locator("#log-events > li")).to_have_count(155, timeout=10_000)
    expect(jump).to_be_visible()
    assert log.evaluate("b => b.scrollTop") == 0, "a reader who scrolled up is not yanked down"

    jump.focus()
    page.keyboard.press("Enter")
    assert log.evaluate(AT_BOTTOM)
    expect(jump).to_be_hidden()

    append_events(session.pk, output(156, 5))
    expect(page.locator("#event-160")).to_be_visible(timeout=10_000)
    assert log.evaluate(AT_BOTTOM), "back at the bottom, the log follows again"
    expect(jump).to_be_hidden()


def test_the_session_page_fits_a_phone(login, team):
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="On the go", branch="main"
    )
    append_events(session.pk, [("output", {"stream": "stdout", "text": "x" * 300})])
    page = login(team.engineer)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(session.get_absolute_url())
    expect(page.locator("#log-events > li")).to_have_count(1)
    expect(page.locator("#prompt-text")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_scrolling_to_the_top_of_the_log_loads_older_events(login, team):
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Older", branch="main"
    )
    append_events(session.pk, output(1, 700))
    page = login(team.engineer)
    page.goto(session.get_absolute_url())
    items = page.locator("#log li.event")
    expect(items).to_have_count(300)
    log = page.locator("#log")
    log.evaluate("b => { b.scrollTop = 0; }")
    expect(items).to_have_count(600, timeout=5_000)
    page.wait_for_timeout(1_000)
    assert items.count() == 600, "one page per scroll, not a cascade to the start"
    log.evaluate("b => { b.scrollTop = 0; }")
    expect(items).to_have_count(700, timeout=5_000)
    seqs = page.eval_on_selector_all("#log li.event", "els => els.map(e => +e.dataset.seq)")
    assert seqs == list(range(1, 701))
