"""A reviewer reads a session's diff: highlighted by language, switched to side by side, a file
marked viewed (still viewed after a reload, and the layout remembered), the whole file opened
for context, and a refusal (a file too large to show whole) shown without losing the diff."""

import shutil

import pytest
from playwright.sync_api import expect

from snapshots import mirror
from tests.browser.conftest import screenshot
from tests.sessions.review_fixtures import APP_AFTER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_switches_layout_marks_viewed_and_expands_context(
    login, team, reviewed_change, tmp_path
):
    session = reviewed_change.session
    # The live server keeps its data in tmp_path (tests/sessions/stream/conftest.py): the
    # session's commits are published to the mirror there.
    mirror_dir = mirror.mirror_path(team.repository.name)
    shutil.copytree(mirror_dir, tmp_path / "mirrors" / mirror_dir.name)
    page = login(team.reviewer)
    page.goto(session.get_absolute_url())
    expect(page.locator("#presence")).to_contain_text("reviewer", timeout=10_000)

    app = page.locator('details.file[data-path="src/app.py"]')
    expect(page.locator("#diff details.file")).to_have_count(4)
    expect(app.locator("table.unified")).to_be_visible()
    expect(app.locator("table.split")).to_be_hidden()
    expect(app.locator("summary .lang")).to_have_text("Python")
    expect(app.locator("table.unified tr.add .s2").first).to_be_visible()  # a Python string

    page.get_by_role("button", name="Side by side").click()
    expect(app.locator("table.split")).to_be_visible()
    expect(app.locator("table.unified")).to_be_hidden()
    expect(app.locator("table.split td.code.del").first).to_be_visible()
    screenshot(page, "diff-side-by-side")

    with page.expect_response(lambda r: "/diff/viewed/" in r.url) as answer:
        app.locator(".viewed-box").check()
    assert answer.value.status == 200
    expect(app).not_to_have_attribute("open", "")
    expect(page.locator("#diff ul.files li.viewed")).to_have_count(1)

    page.reload()
    app = page.locator('details.file[data-path="src/app.py"]')
    expect(app.locator(".viewed-box")).to_be_checked()
    expect(app).not_to_have_attribute("open", "")
    side_by_side = page.get_by_role("button", name="Side by side")
    expect(side_by_side).to_have_attribute("aria-pressed", "true")  # the layout remembered
    notes = page.locator('details.file[data-path="notes.zzq"]')
    expect(notes.locator(".viewed-box")).not_to_be_checked()  # only what was marked

    app.locator("summary code").click()  # open it again to read it whole
    expect(app.locator("table.split")).to_be_visible()
    app.get_by_role("button", name="Show the whole file").click()
    expect(app.locator(".diff-body")).to_contain_text("The whole file at")
    # a header row, then one row per line (the removed line beside the one that replaced it)
    expect(app.locator("table.split tr")).to_have_count(1 + APP_AFTER.count("\n"))
    expect(app.get_by_role("button", name="Show the whole file")).to_be_hidden()
    screenshot(page, "diff-whole-file")

    huge = page.locator('details.file[data-path="src/huge.py"]')
    huge.locator("summary code").click()
    huge.get_by_role("button", name="Show the whole file").click()
    expect(huge.locator(".whole-file-status")).to_contain_text("more than the 20,000 shown whole")
    expect(huge.locator("table.split")).to_be_visible()  # the diff is still there
