"""Settings › Sign-in: who opens it, the Test of a provider (a real OpenID provider in a second
process), what a save refuses, keeps sealed and audits, and the environment winning."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from inspect_web import site_settings
from tests.oidc_op.process import running_provider

pytestmark = pytest.mark.django_db
URL = "/settings/sign-in/"
SECRET = "client-secret-that-must-never-show"


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    data = tmp_path_factory.mktemp("oidc-op")
    with running_provider(data, "http://127.0.0.1:9/unused", []) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_settings():
    site_settings.forget()
    yield
    site_settings.forget()


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form(provider, **changes) -> dict:
    values = {
        "name": "Acme SSO",
        "server_url": provider.issuer,
        "client_id": provider.client_id,
        "client_secret": SECRET,
        "allowed_domains": "acme.test",
        "default_role": "engineer",
        "default_repositories": ["widgets"],
        "action": "save",
    }
    values.update(changes)
    return {name: value for name, value in values.items() if value is not None}


def test_only_site_admins_open_it(team):
    assert client_for(team.admin).get(URL).status_code == 200
    assert client_for(team.engineer).get(URL).status_code == 403
    assert client_for(team.outsider).get(URL).status_code == 403  # a repository's admin only
    anonymous = Client().get(URL)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert client_for(team.engineer).post(URL, form_without_provider()).status_code == 403


def form_without_provider() -> dict:
    return {"allowed_domains": "evil.test", "action": "save"}


def test_test_shows_the_provider_and_saves_nothing(team, provider):
    from inspect_web.models import SiteSetting

    page = client_for(team.admin).post(URL, form(provider, action="test"))
    assert page.status_code == 200
    assert b"Test passed" in page.content and provider.issuer.encode() in page.content
    assert not SiteSetting.objects.exists()


def test_a_url_that_is_no_openid_provider_is_refused_with_the_reason(team, provider):
    from approvals.models import AuditEntry
    from inspect_web.models import SiteSetting

    site = provider.issuer.removesuffix("/openid")
    admin = client_for(team.admin)
    tested = admin.post(URL, form(provider, server_url=f"{site}/login", action="test"))
    assert b"Test failed" in tested.content and b"HTTP 404" in tested.content
    saved = admin.post(URL, form(provider, server_url=f"{site}/login"))
    assert saved.status_code == 200 and b"HTTP 404" in saved.content
    unreachable = admin.post(URL, form(provider, server_url="http://127.0.0.1:9/openid"))
    assert b"Could not reach" in unreachable.content
    assert not SiteSetting.objects.exists()
    assert not AuditEntry.objects.filter(action="settings.sign_in").exists()


def test_bad_input_is_refused_on_the_form(team, provider):
    from inspect_web.models import SiteSetting

    admin = client_for(team.admin)
    bad_domain = admin.post(URL, form(provider, allowed_domains="acme"))
    assert b"is not a domain name" in bad_domain.content
    no_repositories = admin.post(URL, form(provider, default_repositories=None))
    assert b"Choose the repositories" in no_repositories.content
    locked_out = admin.post(URL, {"local_passwords_off": "on", "action": "save"})
    assert b"nobody could log in" in locked_out.content
    no_secret = admin.post(URL, form(provider, client_secret=""))
    assert b"Give the client secret" in no_secret.content
    assert not SiteSetting.objects.exists()


def test_a_save_is_sealed_audited_and_never_shows_the_secret(team, provider):
    from accounts import social_apps
    from approvals.models import AuditEntry
    from inspect_web.models import SiteSetting

    admin = client_for(team.admin)
    response = admin.post(URL, form(provider))
    assert response.status_code == 302
    app = social_apps.oidc_app()
    assert (app.name, app.client_id, app.secret) == ("Acme SSO", provider.client_id, SECRET)
    assert app.settings["server_url"] == provider.issuer
    assert social_apps.allowed_domains() == ["acme.test"]
    assert social_apps.default_grant() == ("engineer", ["widgets"])
    stored = SiteSetting.objects.get(name="INSPECT_OIDC_CLIENT_SECRET").value
    assert SECRET not in stored
    page = admin.get(URL)
    assert SECRET.encode() not in page.content and b"A secret is stored" in page.content
    entry = AuditEntry.objects.get(action="settings.sign_in")
    assert entry.actor == team.admin and SECRET not in str(entry.data)
    assert entry.data["client_secret_changed"] is True
    assert entry.data["changed"]["INSPECT_OIDC_SERVER_URL"] == provider.issuer
    # An empty secret field keeps the stored secret.
    admin.post(URL, form(provider, client_secret="", name="Acme"))
    site_settings.forget()
    assert social_apps.oidc_app().secret == SECRET and social_apps.oidc_name() == "Acme"
    login = Client().get("/accounts/login/")
    assert b"Log in with Acme" in login.content


def test_the_environment_wins_and_pins_its_fields(team, provider):
    from accounts import social_apps

    with override_settings(OIDC_NAME="Corp login", LOCAL_PASSWORDS_OFF=""):
        site_settings.forget()
        client_for(team.admin).post(URL, form(provider, name="Page name"))
        site_settings.forget()
        assert social_apps.oidc_name() == "Corp login"
        page = client_for(team.admin).get(URL)
        assert b"Set by the environment" in page.content
        assert b'value="Corp login"' in page.content and b"disabled" in page.content


def test_stored_github_credentials_enable_github_login_without_restart(team):
    assert b"Log in with GitHub" not in Client().get("/accounts/login/").content
    site_settings.store("GITHUB_OAUTH_CLIENT_ID", "Iv1.stored", by=team.admin)
    site_settings.store("GITHUB_OAUTH_CLIENT_SECRET", "stored-secret", by=team.admin)
    page = Client().get("/accounts/login/")
    assert b"Log in with GitHub" in page.content
    assert b"/accounts/github/login/" in page.content
    assert page.context["github_login"]()


def test_github_credentials_from_the_environment_win_over_stored_ones(team):
    from accounts import social_apps

    site_settings.store("GITHUB_OAUTH_CLIENT_ID", "Iv1.stored", by=team.admin)
    site_settings.store("GITHUB_OAUTH_CLIENT_SECRET", "stored-secret", by=team.admin)
    with override_settings(GITHUB_OAUTH_CLIENT_ID="Iv1.env", GITHUB_OAUTH_CLIENT_SECRET="env"):
        app = social_apps.github_app()
        assert (app.client_id, app.secret) == ("Iv1.env", "env")
        assert b"/accounts/github/login/" in Client().get("/accounts/login/").content


def test_a_secret_the_key_cannot_open_drops_the_button_not_the_login_page(team):
    from inspect_web.models import SiteSetting

    site_settings.store("GITHUB_OAUTH_CLIENT_ID", "Iv1.stored", by=team.admin)
    SiteSetting.objects.create(name="GITHUB_OAUTH_CLIENT_SECRET", value="fernet:not-ours")
    site_settings.forget()
    page = Client().get("/accounts/login/")
    assert page.status_code == 200 and b"/accounts/github/login/" not in page.content
    assert client_for(team.admin).get(URL).status_code == 200


def test_emptying_the_issuer_turns_single_sign_on_off_and_forgets_the_secret(team, provider):
    from accounts import social_apps
    from approvals.models import AuditEntry
    from inspect_web.models import SiteSetting

    admin = client_for(team.admin)
    assert admin.post(URL, form(provider)).status_code == 302
    off = form(provider, server_url="", client_id="", client_secret="", name="")
    assert admin.post(URL, off).status_code == 302
    site_settings.forget()
    assert social_apps.oidc_app() is None
    assert not SiteSetting.objects.filter(name="INSPECT_OIDC_CLIENT_SECRET").exists()
    last = AuditEntry.objects.filter(action="settings.sign_in").order_by("-seq").first()
    assert last.data["client_secret_changed"] is True
    assert b"Log in with" not in Client().get("/accounts/login/").content
