"""The recipe page in a real browser, as a new admin uses it: a typo is caught as it is typed
(line and column, Save disabled), the fixed recipe is saved, and "Build now" shows the build's
log while a real Celery worker builds a real local repository."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

URL = "/settings/repositories/widgets/recipe/"
# Lines spread over about two seconds, so the page must show them while the build runs.
SLOW_SETUP = 'setup = ["for i in 1 2 3 4 5 6 7 8; do echo tick-$i; sleep 0.25; done"]\n'


def test_engineer_gets_403_and_a_non_member_404(login, team):
    assert login(team.engineer).goto(URL).status == 403
    assert login(team.outsider).goto(URL).status == 404


def test_a_typo_is_caught_as_typed_then_the_fixed_recipe_is_saved_and_built_live(
    login, team, make_git_repo, celery_worker_process
):
    upstream = make_git_repo(files={"README.md": "# widgets\n"})
    team.repository.url = str(upstream.path)
    team.repository.save()
    page = login(team.admin)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    assert page.goto(URL).status == 200
    expect(page.get_by_role("heading", name="Recipe of widgets")).to_be_visible()

    editor, save = page.locator("#id_text"), page.locator("#save-recipe")
    editor.click()
    page.keyboard.type('setup = ["echo one"\nverify = ["true"]\n')
    expect(page.locator("#recipe-error")).to_contain_text("line 2, column 1")
    expect(page.locator("#recipe-error")).to_contain_text("does not parse")
    expect(save).to_be_disabled()
    screenshot(page, "settings-recipe-syntax-error")

    editor.fill("")
    editor.press_sequentially(SLOW_SETUP, delay=5)
    expect(page.locator("#recipe-check")).to_contain_text("Valid.")
    expect(save).to_be_enabled()
    save.click()
    expect(page.locator(".messages")).to_contain_text("Recipe of widgets saved.")
    expect(page.locator("#recipe-in-force")).to_contain_text("tick-$i")
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == SLOW_SETUP

    page.click("#build-now")
    log = page.locator("#build-log")
    expect(log.locator(".build-line", has_text="tick-1")).to_be_visible(timeout=60_000)
    # Live: the first lines are on the page while the build is still running.
    assert page.locator("#build-final").count() == 0, "the log appeared only at the end"
    expect(log.locator(".build-line", has_text="tick-8")).to_be_visible(timeout=30_000)
    expect(page.locator("#build-final")).to_have_attribute("data-state", "ready", timeout=30_000)
    expect(page.locator("#build-final")).to_contain_text("Build ready")
    screenshot(page, "settings-recipe-built")
    assert errors == []
