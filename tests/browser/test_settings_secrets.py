"""The secrets page in a real browser: add a secret (a password field the browser does not
fill), see its name, scope and "never used", replace it, delete it; the value never shows."""

import pytest
from playwright.sync_api import expect

from approvals.models import RepositorySecret
from approvals.secrets import secret_env
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

URL = "/settings/repositories/widgets/secrets/"
VALUE = "npm_9f8e7d6c5b4a-token"


def test_engineer_gets_403_and_a_non_member_404(login, team):
    assert login(team.engineer).goto(URL).status == 403
    assert login(team.outsider).goto(URL).status == 404


def test_an_admin_adds_replaces_and_deletes_a_secret(login, team):
    page = login(team.admin)
    asked = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    assert page.goto(URL).status == 200
    value = page.locator("#id_value")
    expect(value).to_have_attribute("type", "password")
    expect(value).to_have_attribute("autocomplete", "new-password")

    page.fill("#id_name", "npm token")
    value.fill(VALUE)
    page.click("text=Save secret")
    expect(page.locator("[role=alert]")).to_contain_text("an environment variable name")
    expect(page.locator("#id_value")).to_have_value("")

    page.fill("#id_name", "NPM_TOKEN")
    page.select_option("#id_scope", "agent")
    page.fill("#id_value", VALUE)
    page.click("text=Save secret")
    expect(page.locator(".messages")).to_contain_text("Secret NPM_TOKEN of widgets saved")
    row = page.locator("#secret-NPM_TOKEN")
    expect(row).to_contain_text("setup, start and the agent")
    expect(row).to_contain_text("never")
    assert VALUE not in page.content()

    secret_env(team.repository, scope="agent")  # a command is given it
    page.reload()
    expect(row.locator("td").nth(3)).not_to_have_text("never")

    row.get_by_role("link", name="Replace").click()
    expect(page.locator("#id_name")).to_have_value("NPM_TOKEN")
    page.select_option("#id_scope", "setup_start")
    page.fill("#id_value", VALUE + "-rotated")
    page.click("text=Save secret")
    expect(row).to_contain_text("setup and start commands only")
    assert secret_env(team.repository, scope="setup_start") == {"NPM_TOKEN": VALUE + "-rotated"}
    assert VALUE not in page.content()
    screenshot(page, "settings-secrets")

    row.get_by_role("button", name="Delete NPM_TOKEN").click()
    expect(page.locator(".messages")).to_contain_text("Secret NPM_TOKEN of widgets deleted")
    assert asked and asked[0].startswith("Delete the secret NPM_TOKEN?")
    expect(page.locator("#secret-NPM_TOKEN")).to_have_count(0)
    assert not RepositorySecret.objects.exists()
