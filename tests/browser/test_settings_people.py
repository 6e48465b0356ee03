"""Settings › People in a real browser: an admin invites by username and by e-mail, changes a
role, removes a member, and cannot remove the last admin; the invitation link signs a new person
up (open sign-up is off) and makes them a member with the invited role."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts.models import Membership
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PEOPLE = "/settings/repositories/widgets/people/"


def _role(team, username: str) -> str | None:
    return (
        Membership.objects.filter(repository=team.repository, user__username=username)
        .values_list("role", flat=True)
        .first()
    )


def _invite(page, who: str, role: str) -> None:
    page.get_by_label("Username or e-mail").fill(who)
    page.get_by_label("Role", exact=True).select_option(role)
    page.get_by_role("button", name="Invite").click()


def test_an_admin_manages_the_people_of_a_repository(login, team):
    get_user_model().objects.create_user("newcomer", password="a long passphrase 42")
    page = login(team.admin)
    page.goto("/settings/repositories/widgets/")
    page.get_by_role("link", name="People").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("People of widgets")

    _invite(page, "newcomer", "reviewer")
    expect(page.locator(".messages")).to_contain_text("newcomer is now reviewer")
    expect(page.locator('tr[data-member="newcomer"]')).to_be_visible()
    assert _role(team, "newcomer") == "reviewer"

    _invite(page, "engineer", "admin")
    expect(page.locator("#id_who-error")).to_contain_text("already a member of widgets")

    _invite(page, "friend@example.org", "engineer")
    link = page.get_by_label("Invitation link").input_value()  # shown once, on this page
    assert link.startswith("http://127.0.0.1:") and "/invitations/" in link
    expect(page.locator("main")).to_contain_text("Pending invitations")
    expect(page.locator("main")).to_contain_text("friend@example.org")
    screenshot(page, "settings-people-invited")

    row = page.locator('tr[data-member="engineer"]')
    row.get_by_label("Role of engineer").select_option("manager")
    row.get_by_role("button", name="Change role").click()
    expect(page.locator(".messages")).to_contain_text("engineer is now manager")
    assert _role(team, "engineer") == "manager"

    page.get_by_role("button", name="Remove reviewer").click()
    expect(page.locator(".messages")).to_contain_text("reviewer is no longer a member")
    expect(page.locator('tr[data-member="reviewer"]')).to_have_count(0)
    assert _role(team, "reviewer") is None

    page.get_by_role("button", name="Remove admin").click()
    expect(page.locator(".messages")).to_contain_text("admin is the last admin of widgets")
    assert _role(team, "admin") == "admin"
    screenshot(page, "settings-people-last-admin")


def test_an_invitation_link_signs_a_new_person_up(login, browser, live_server_url, team):
    from snapshots.members import invite

    base, _ = live_server_url
    link = invite(
        team.repository, "joiner@example.org", "reviewer", by=team.admin, base_url=base
    ).link
    context = browser.new_context(base_url=base)
    try:
        page = context.new_page()
        page.goto("/accounts/signup/")
        expect(page.locator("body")).to_contain_text("Sign Up Closed")
        page.goto(link)
        expect(page.locator("main")).to_contain_text("invited joiner@example.org to join widgets")
        page.get_by_role("link", name="Create an account").click()
        expect(page.locator("input[name=email]")).to_have_value("joiner@example.org")
        page.locator("input[name=username]").fill("joiner")
        page.locator("input[name=password1]").fill("a long enough passphrase 42")
        page.locator("input[name=password2]").fill("a long enough passphrase 42")
        page.locator("form", has=page.locator("input[name=username]")).locator(
            "button[type=submit]"
        ).click()
        page.get_by_role("button", name="Join widgets as joiner").click()
        expect(page.locator(".messages")).to_contain_text("You are now reviewer on widgets")
        screenshot(page, "invitation-joined")
        user = get_user_model().objects.get(username="joiner")
        assert user.email == "joiner@example.org"
        assert _role(team, "joiner") == "reviewer"
        page.goto(link)
        expect(page.locator("main")).to_contain_text("already been used")
    finally:
        context.close()
