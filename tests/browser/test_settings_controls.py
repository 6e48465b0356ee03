"""The approvals-and-egress page in a real browser: the default policy in force, a new policy
saved; a wider egress asked for on the page waits for another reviewer."""

import re

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from approvals.policy import policy_for
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

URL = "/settings/repositories/widgets/controls/"


def test_engineer_gets_403_and_a_non_member_404(login, team):
    assert login(team.engineer).goto(URL).status == 403
    assert login(team.outsider).goto(URL).status == 404


def test_an_admin_changes_the_policy_and_asks_for_wider_egress(login, team):
    team.repository.recipe_override = 'setup = ["make"]\n'
    team.repository.save()
    page = login(team.admin)
    assert page.goto(URL).status == 200
    expect(page.locator("#policy-in-force")).to_contain_text("merge_pr, push_protected")
    expect(page.locator("#egress-in-force")).to_have_text("none")

    page.fill("#id_text", 'require = ["merge_pr", "widen_egress"]\nexpire_hours = 0\n')
    page.click("text=Save policy")
    expect(page.locator("[role=alert]")).to_contain_text("'expire_hours' must be a whole number")
    # Dropping push_protected and delete_branch loosens the policy: it waits for a reviewer.
    page.fill("#id_text", 'require = ["merge_pr", "widen_egress"]\nexpire_hours = 24\n')
    page.click("text=Save policy")
    expect(page.locator(".messages")).to_contain_text("waiting for a reviewer")
    loosen = ApprovalRequest.objects.get(action="loosen_policy")
    expect(page.locator(f"#policy-requests a[href='/approvals/{loosen.pk}/']")).to_be_visible()
    expect(page.locator("#policy-requests")).to_contain_text(
        "push_protected, delete_branch would no longer wait for approval"
    )
    expect(page.locator("#policy-in-force")).to_contain_text("merge_pr, push_protected")
    assert policy_for(team.repository).expire_hours == 72
    # Keeping every gated action (a change that gates no less) applies at once.
    page.fill("#id_text", 'require = ["merge_pr", "push_protected", "widen_egress", '
              '"delete_branch"]\nexpire_hours = 24\n')  # fmt: skip
    page.click("text=Save policy")
    expect(page.locator(".messages")).to_contain_text("Approval policy of widgets saved.")
    expect(page.locator("#policy-in-force")).to_contain_text("24 hours")
    assert policy_for(team.repository).expire_hours == 24

    page.select_option("#id_mode", "allowlist")
    page.fill("#id_domains", "pkgs.example.org\nfiles.example.org")
    page.click("text=Change egress")
    expect(page.locator(".messages")).to_contain_text("approval request")
    expect(page.locator("#egress-in-force")).to_have_text("none")
    pending = ApprovalRequest.objects.get(action="widen_egress")
    expect(page.locator("#egress-requests")).to_contain_text(
        "egress none → allowlist (pkgs.example.org, files.example.org)"
    )
    screenshot(page, "settings-controls")
    page.click(f"#egress-requests a[href='/approvals/{pending.pk}/']")
    expect(page).to_have_url(re.compile(rf"/approvals/{pending.pk}/$"))
    team.repository.refresh_from_db()
    assert team.repository.approved_network.mode == "none" and pending.requested_by == team.admin
