"""The Models settings in a real browser: a site admin connects a provider against the stand-in
model and tests it (refused, then accepted), a repository admin sets its default model, list
and budget; an engineer gets 403 and a non-member 404."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from gateway.models import Budget
from inspect_web.models import SiteSetting
from tests.browser.conftest import screenshot
from tests.settings_area import provider_fixtures as fixtures
from tests.settings_area.provider_fixtures import GOOD_KEY, WRONG_KEY

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
no_provider_env, provider, site_admin = (
    fixtures.no_provider_env, fixtures.provider, fixtures.site_admin
)  # fmt: skip


def test_a_site_admin_connects_and_tests_a_provider(login, no_provider_env, site_admin, provider):
    page = login(site_admin)
    assert page.goto("/settings/models/").status == 200
    anthropic = page.locator("section#anthropic")
    expect(anthropic.locator(".state")).to_have_text("not set")
    anthropic.locator("#anthropic-key").fill(WRONG_KEY)
    anthropic.locator("#anthropic-url").fill(provider.url)
    anthropic.get_by_role("button", name="Connect").click()
    anthropic = page.locator("section#anthropic")
    expect(anthropic.get_by_role("status")).to_contain_text("Saved")
    expect(anthropic.locator(".key")).to_contain_text("ending …9d1c")
    anthropic.get_by_role("button", name="Test").click()
    result = page.locator("section#anthropic .test-result")
    expect(result).to_have_text("Refused: 401: invalid x-api-key")
    screenshot(page, "settings-models-refused")

    anthropic = page.locator("section#anthropic")
    anthropic.locator("#anthropic-key").fill(GOOD_KEY)
    anthropic.get_by_role("button", name="Replace").click()
    page.locator("section#anthropic").get_by_role("button", name="Test").click()
    expect(page.locator("section#anthropic .test-result")).to_contain_text(
        f"OK: {provider.url} accepted the key"
    )
    screenshot(page, "settings-models-ok")
    html = page.content()
    assert GOOD_KEY not in html and WRONG_KEY not in html
    assert page.locator("#anthropic-key").input_value() == ""  # never filled back in

    compatible = page.locator("section#compatible")
    compatible.locator("#compatible-url").fill("ftp://models.example")
    compatible.get_by_role("button", name="Connect").click()
    expect(page.locator("#compatible-url-error")).to_contain_text("is not an http(s) URL")
    # Stored sealed (this process holds another INSPECT_SECRETS_KEY than the live server's).
    stored = SiteSetting.objects.get(name="ANTHROPIC_API_KEY").value
    assert stored.startswith("fernet:") and GOOD_KEY not in stored
    assert not SiteSetting.objects.filter(name="INSPECT_LLM_BASE_URL").exists()


def test_the_models_page_fits_a_phone(login, no_provider_env, site_admin):
    page = login(site_admin)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.goto("/settings/models/").status == 200
    screenshot(page, "settings-models-phone")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_a_repository_admin_sets_its_default_model_list_and_a_site_admin_its_budget(
    login, no_provider_env, team, site_admin
):
    page = login(site_admin)
    assert page.goto("/settings/repositories/widgets/models/").status == 200
    page.fill("#default-model", "claude-sonnet-4-5")
    page.locator("#default-model-section").get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("New sessions that name no model use it")
    page.fill("#models-text", "gpt-4.1*")
    page.get_by_role("button", name="Save list").click()
    expect(page.locator("#models-error")).to_contain_text("leaves out claude-sonnet-4-5")
    page.fill("#models-text", "claude-*\ngpt-4.1*")
    page.get_by_role("button", name="Save list").click()
    expect(page.get_by_role("status")).to_contain_text("Saved")
    page.select_option("#budget-period", "month")
    page.fill("#budget-limit", "250")
    page.get_by_role("button", name="Set budget").click()
    expect(page.locator("#budget-month")).to_contain_text("$250")
    screenshot(page, "settings-repository-models")
    team.repository.refresh_from_db()
    assert team.repository.default_model == "claude-sonnet-4-5"
    assert team.repository.allowed_models == ["claude-*", "gpt-4.1*"]
    assert Budget.objects.get().repository_id == team.repository.pk

    outsider = login(team.outsider)  # admin of gadgets: sees its budgets, cannot set them
    assert outsider.goto("/settings/repositories/gadgets/models/").status == 200
    expect(outsider.locator("#budgets-section")).to_contain_text("Only a site admin sets budgets")
    expect(outsider.get_by_role("button", name="Set budget")).to_have_count(0)


def test_an_engineer_gets_403_and_a_non_member_404(login, team):
    engineer = login(team.engineer)
    assert engineer.goto("/settings/models/").status == 403
    refused = engineer.goto("/settings/repositories/widgets/models/")
    assert refused.status == 403
    expect(engineer.locator("body")).to_contain_text("ask one of its admins")
    outsider = login(team.outsider)
    assert outsider.goto("/settings/repositories/widgets/models/").status == 404
    assert outsider.goto("/settings/models/").status == 403  # a repository admin, not a site one
