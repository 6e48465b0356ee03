"""The session page in a real browser: before/after screenshots, the live preview, and a
terminal whose output cannot inject anything into the page."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.sessions.screenshots.conftest import REDDEN, web_repo  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_newcomer_sees_the_screenshots_opens_the_preview_and_fixes_a_line_by_hand(
    login,
    team,
    web_repo,  # noqa: F811
    create_session,
    tmp_path,
):
    from django.conf import settings

    # daphne's data dir is tmp_path: let it find the artifacts this process stored.
    (tmp_path / "media").symlink_to(settings.MEDIA_ROOT, target_is_directory=True)
    _, summary, _ = create_session(
        "--prompt", "make it red", "--agent-command", REDDEN, "--inline", "--as", "engineer"
    )
    page = login(team.engineer)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"/sessions/{summary['id']}/")

    shots = page.locator("#shots img")
    expect(shots).to_have_count(4)
    for i in range(4):
        shots.nth(i).scroll_into_view_if_needed()
        expect(shots.nth(i)).to_have_js_property("naturalWidth", 640)

    with page.context.expect_page() as opened:
        page.click("text=Open live preview")
    preview = opened.value
    expect(preview.locator("h1")).to_have_text("Goodbye")

    page.click("text=Open terminal")
    expect(page.locator(".terminal-state")).to_contain_text("what you type runs", timeout=15_000)
    page.locator(".terminal-screen").click()
    page.keyboard.type("sed -i 's/Goodbye/Goodbye, by hand/' index.html && echo fixed\n")
    expect(page.locator(".terminal-screen .xterm-rows")).to_contain_text("fixed", timeout=15_000)
    page.click("text=Record my edits in the diff")
    expect(page.locator(".terminal-state")).to_contain_text("Your edits are in the diff")
    preview.reload()
    expect(preview.locator("h1")).to_have_text("Goodbye, by hand")
    page.reload()
    expect(page.locator("#diff")).to_contain_text("Goodbye, by hand")
    screenshot(page, "session-with-screenshots-and-terminal")
    assert errors == []


def test_terminal_output_cannot_inject_markup_into_the_page(
    login, team, ready_repo, create_session
):
    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")
    page = login(team.engineer)
    page.goto(f"/sessions/{summary['id']}/")
    page.click("text=Open terminal")
    expect(page.locator(".terminal-state")).to_contain_text("what you type runs", timeout=15_000)
    page.locator(".terminal-screen").click()
    # Markup and escape sequences (a title change, a hyperlink) printed by the sandbox.
    page.keyboard.type(
        'printf \'<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
        "\\033]0;<b>title</b>\\007\\033]8;;javascript:window.pwned=3\\007link\\033]8;;\\007"
        "\\n'; echo end-$((1+1))\n"
    )
    rows = page.locator(".terminal-screen .xterm-rows")
    expect(rows).to_contain_text("end-2", timeout=15_000)
    expect(rows).to_contain_text('<img src=x onerror="window.pwned=1">')
    assert page.locator(".terminal-screen img, .terminal-screen script").count() == 0
    assert page.locator("#terminal b, #terminal a[href^='javascript']").count() == 0
    assert page.evaluate("window.pwned") is None
