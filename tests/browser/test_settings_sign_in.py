"""Single sign-on end to end in a real browser, against a real OpenID provider (django-oidc-
provider in a second process): a site admin sets it up on Settings › Sign-in, a company user logs
in with it and arrives as a new user with the domain's default role, a user of another domain is
refused, and with local passwords off the login page offers only the single sign-on button."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts.models import Membership
from inspect_web import site_settings
from tests.browser.conftest import screenshot
from tests.oidc_op.process import running_provider

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
USERS = [
    ("alice", "alice@acme.test", "alice provider password"),
    ("mallory", "mallory@other.test", "mallory provider password"),
]


@pytest.fixture
def provider(live_server_url, tmp_path):
    base, _ = live_server_url
    with running_provider(
        tmp_path / "oidc-op", f"{base}/accounts/oidc/sso/login/callback/", USERS
    ) as running:
        yield running


def sign_in_with_provider(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_role("button", name="Log in with Acme SSO").click()
    expect(page.get_by_role("heading", name="Test identity provider")).to_be_visible()
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name="Sign in to the provider").click()


def test_single_sign_on_from_setup_to_a_new_users_first_login(browser, login, team, provider):
    site_settings.forget()
    admin = login(team.admin)
    admin.goto("/settings/sign-in/")
    admin.get_by_label("Name on the login button").fill("Acme SSO")
    admin.get_by_label("Issuer URL").fill(provider.issuer)
    admin.get_by_label("Client id").fill(provider.client_id)
    admin.get_by_label("Client secret").fill(provider.client_secret)
    admin.get_by_label("Allowed e-mail domains").fill("acme.test")
    admin.get_by_label("Role of a new user").select_option("reviewer")
    admin.get_by_label("widgets").check()
    admin.get_by_role("button", name="Test").click()
    expect(admin.locator(".test-result")).to_contain_text("Test passed")
    expect(admin.locator(".test-result")).to_contain_text(provider.issuer)
    screenshot(admin, "sign-in-tested")
    admin.get_by_label("Client secret").fill(provider.client_secret)  # write-only: not re-shown
    admin.get_by_role("button", name="Save").click()
    expect(admin.locator(".messages")).to_contain_text("Sign-in settings saved")
    admin.get_by_role("button", name="Log out").click()
    expect(admin.get_by_role("button", name="Log in with Acme SSO")).to_be_visible()
    screenshot(admin, "sign-in-login-page")

    # A company user: the provider's own login form, then back here as a new user.
    sign_in_with_provider(admin, "alice", "alice provider password")
    expect(admin.get_by_role("button", name="Log out")).to_be_visible()
    expect(admin.locator("body")).to_contain_text("alice")
    alice = get_user_model().objects.get(username="alice")
    assert alice.email == "alice@acme.test"
    role = Membership.objects.get(user=alice, repository=team.repository).role
    assert role == "reviewer"
    assert not Membership.objects.filter(user=alice, repository=team.other_repository).exists()
    screenshot(admin, "sign-in-new-user-home")

    # Another domain: refused on the login page, no account made.
    stranger = browser.new_context(base_url=live_base(admin))
    page = stranger.new_page()
    sign_in_with_provider(page, "mallory", "mallory provider password")
    expect(page.locator(".messages")).to_contain_text("only verified e-mail addresses at acme.test")
    expect(page.get_by_role("button", name="Log in with Acme SSO")).to_be_visible()
    assert not get_user_model().objects.filter(email="mallory@other.test").exists()
    screenshot(page, "sign-in-other-domain-refused")
    stranger.close()


def live_base(page) -> str:
    scheme, _, host = page.url.split("/", 3)[:3]
    return f"{scheme}//{host}"


def test_local_passwords_off_leaves_only_single_sign_on(browser, login, team, provider):
    site_settings.forget()
    admin = login(team.admin)
    admin.goto("/settings/sign-in/")
    admin.get_by_label("Name on the login button").fill("Acme SSO")
    admin.get_by_label("Issuer URL").fill(provider.issuer)
    admin.get_by_label("Client id").fill(provider.client_id)
    admin.get_by_label("Client secret").fill(provider.client_secret)
    admin.get_by_label("Local passwords off").check()
    admin.get_by_role("button", name="Save").click()
    expect(admin.locator(".messages")).to_contain_text("Sign-in settings saved")

    visitor = browser.new_context(base_url=live_base(admin))
    page = visitor.new_page()
    page.goto("/accounts/login/")
    expect(page.get_by_role("button", name="Log in with Acme SSO")).to_be_visible()
    expect(page.locator("input[name=password]")).to_have_count(0)
    expect(page.locator("main")).to_contain_text("Password sign-in is off on this site")
    screenshot(page, "sign-in-passwords-off")
    # The server refuses a correct password posted anyway (with the page's CSRF token).
    token = next(c["value"] for c in visitor.cookies() if c["name"] == "csrftoken")
    refused = page.request.post(
        "/accounts/login/",
        form={"login": "engineer", "password": "correct horse battery staple"},
        headers={"X-CSRFToken": token, "Referer": live_base(admin) + "/accounts/login/"},
        max_redirects=0,
    )
    assert refused.status == 200 and "Password sign-in is off" in refused.text()
    page.goto("/")
    expect(page).to_have_url(f"{live_base(admin)}/accounts/login/?next=/")
    visitor.close()
