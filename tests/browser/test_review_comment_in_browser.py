"""A reviewer of a repository with no code host comments on a line of a session's diff in the
browser and submits the review: it becomes one follow-up prompt for the agent, holding the file,
the line, the code it is on and the comment."""

import pytest
from playwright.sync_api import expect

from sessions.models import Prompt, ReviewComment
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHANGED_LINE = 82  # `return "twenty <b>"` in src/app.py after the change (APP_AFTER)


def test_a_line_comment_submitted_as_a_review_becomes_one_prompt(login, team, reviewed_change):
    session = reviewed_change.session
    page = login(team.engineer)
    page.goto(session.get_absolute_url())
    expect(page.locator("#review-comments")).to_contain_text("No review comments.")

    page.locator("#review-path").fill("src/app.py")
    page.locator("#review-line").fill(str(CHANGED_LINE))
    page.locator("#review-body").fill("Name this constant instead of returning markup.")
    page.get_by_role("button", name="Add to review").click()
    expect(page.locator("#review-comments")).to_contain_text(f"src/app.py:{CHANGED_LINE}")
    expect(page.locator("#review-comments")).to_contain_text("1 comment waiting")
    assert not Prompt.objects.filter(session=session).exists()  # a draft asks nothing yet

    page.locator("#review-summary").fill("One change, then it is good.")
    page.get_by_label("Request changes").check()
    page.get_by_role("button", name="Submit review").click()
    expect(page.locator("body")).to_contain_text("Review submitted: follow-up prompt")
    screenshot(page, "review-comment-submitted")

    [prompt] = Prompt.objects.filter(session=session)
    assert prompt.author == team.engineer
    assert f"`src/app.py` line {CHANGED_LINE}" in prompt.text
    assert 'return "twenty <b>"' in prompt.text  # the code the comment is on
    assert "Name this constant instead of returning markup." in prompt.text
    assert "One change, then it is good." in prompt.text
    [comment] = ReviewComment.objects.filter(session=session)
    assert comment.state != ReviewComment.State.DRAFT
