"""Connect GitHub: the App manifest flow against the stand-in, stored sealed and audited; the
environment still wins; adding a repository an installation can read."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from approvals.models import AuditEntry
from inspect_web import site_settings
from inspect_web.models import SiteSetting
from integrations.github import app_settings, manifest
from integrations.github.models import GitHubLink
from snapshots.models import Repository
from tests.integrations.github import manifest_flow

pytestmark = pytest.mark.django_db

SECRET_NAMES = ("GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET", "GITHUB_OAUTH_CLIENT_SECRET")


@pytest.fixture
def admin_client(team):
    client = Client()
    client.force_login(team.admin)
    site_settings.forget()
    yield client
    site_settings.forget()


def connect(client, fake, **form) -> tuple[str, dict]:
    """Run the flow up to GitHub's redirect: (callback path, the manifest posted)."""
    action, posted = manifest_flow.start(client, web_url=fake.url, **form)
    location = manifest_flow.create_on_github(action, posted)
    return manifest_flow.callback_path(location), posted


def stored() -> dict[str, str]:
    return dict(SiteSetting.objects.values_list("name", "value"))


def test_the_manifest_flow_stores_the_app_sealed_and_audited(admin_client, bare_github, team):
    path, posted = connect(admin_client, bare_github)
    # The manifest: this site's webhook and callbacks, what the product needs.
    assert posted["hook_attributes"]["url"] == "http://testserver/webhooks/github/"
    assert posted["redirect_url"] == "http://testserver/settings/github/callback/"
    assert posted["callback_urls"] == ["http://testserver/accounts/github/login/callback/"]
    assert posted["default_permissions"]["contents"] == "write"
    assert posted["default_permissions"]["pull_requests"] == "write"
    assert {"pull_request", "pull_request_review", "issue_comment", "push"} <= set(
        posted["default_events"]
    )
    assert path.startswith("/settings/github/callback/?code=") and "state=" in path

    answer = admin_client.get(path, follow=True)
    assert answer.status_code == 200
    app = next(iter(bare_github.apps.values()))
    text = answer.content.decode()
    assert f"GitHub App Inspect Test ({app.slug}, id {app.id}) connected" in text

    rows = stored()
    assert rows["GITHUB_APP_ID"] == str(app.id) and rows["GITHUB_APP_SLUG"] == app.slug
    assert rows["GITHUB_OAUTH_CLIENT_ID"] == app.client_id
    assert rows["GITHUB_WEB_URL"] == bare_github.url
    assert "GITHUB_API_URL" not in rows  # derived from the web address: GHES's /api/v3
    for name in SECRET_NAMES:
        assert rows[name].startswith("fernet:"), name
    assert app.webhook_secret not in json.dumps(rows)
    assert app_settings.app_id() == str(app.id)
    assert app_settings.webhook_secret() == app.webhook_secret
    assert app_settings.private_key().startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert app_settings.api_url() == f"{bare_github.url}/api/v3"
    assert bare_github.calls("POST", r"/api/v3/app-manifests/[^/]+/conversions")

    entry = AuditEntry.objects.get(action="github.app_connect")
    assert entry.actor == team.admin and entry.data["id"] == app.id
    dumped = json.dumps(entry.data)
    for value in (app.webhook_secret, app.client_secret, "PRIVATE KEY"):
        assert value not in dumped
    # The page shows the App and where each setting comes from, never a secret.
    page = admin_client.get("/settings/github/").content.decode()
    assert app.webhook_secret not in page and "PRIVATE KEY-----" not in page
    assert f"{bare_github.url}/apps/{app.slug}/installations/new" in page
    assert page.count("settings page") >= 5
    assert bare_github.problems == []


def test_install_then_add_a_repository_with_its_detected_branch(admin_client, bare_github, team):
    path, _ = connect(admin_client, bare_github)
    admin_client.get(path)
    app = next(iter(bare_github.apps.values()))
    back = manifest_flow.install(bare_github, app.slug, "octo-org/gizmos")
    assert back.startswith("http://testserver/settings/github/?installation_id=")

    page = admin_client.get("/settings/github/").content.decode()
    assert 'data-repository="octo-org/gizmos"' in page and "<td>master</td>" in page
    installation = bare_github.repo("octo-org/gizmos").installation
    # Asked as GitHub Enterprise Server is: the API under /api/v3 of the web address.
    assert bare_github.calls("GET", "/api/v3/app/installations")
    assert bare_github.calls("GET", "/api/v3/installation/repositories")

    answer = admin_client.post(
        "/settings/github/add/",
        {"installation_id": installation, "full_name": "octo-org/gizmos", "name": "gizmos"},
        follow=True,
    )
    assert "Added gizmos from octo-org/gizmos (default branch master)" in answer.content.decode()
    repository = Repository.objects.get(name="gizmos")
    assert repository.default_branch == "master"
    assert repository.url == f"{bare_github.url}/octo-org/gizmos.git"
    link = GitHubLink.objects.get(repository=repository)
    assert (link.full_name, link.installation_id) == ("octo-org/gizmos", installation)
    assert repository.memberships.get().user == team.admin
    assert AuditEntry.objects.filter(action="github.link", repository=repository).exists()
    assert AuditEntry.objects.filter(action="repository.add", repository=repository).exists()
    # git read it with an installation token (the stand-in refuses git without one).
    assert bare_github.calls("GET", "/octo-org/gizmos.git/info/refs")
    page = admin_client.get("/settings/github/").content.decode()
    assert "added as" in page
    assert bare_github.problems == []


def test_a_refused_addition_is_shown_and_saves_nothing(admin_client, bare_github, team):
    path, _ = connect(admin_client, bare_github)
    admin_client.get(path)
    app = next(iter(bare_github.apps.values()))
    manifest_flow.install(bare_github, app.slug, "octo-org/gizmos")
    installation = bare_github.repo("octo-org/gizmos").installation
    before = AuditEntry.objects.count()

    taken = admin_client.post(
        "/settings/github/add/",
        {"installation_id": installation, "full_name": "octo-org/gizmos", "name": "widgets"},
    )
    assert taken.status_code == 400
    assert "a repository named &#x27;widgets&#x27; already exists" in taken.content.decode()

    unreadable = admin_client.post(
        "/settings/github/add/",
        {"installation_id": installation, "full_name": "octo-org/secret", "name": "secret"},
    )
    assert unreadable.status_code == 400
    assert "cannot read octo-org/secret" in unreadable.content.decode()
    assert not GitHubLink.objects.exists()
    assert not Repository.objects.filter(name__in=["gizmos", "secret"]).exists()
    assert AuditEntry.objects.count() == before


def test_a_failed_conversion_is_shown_and_stores_nothing(admin_client, bare_github):
    path, _ = connect(admin_client, bare_github)
    bare_github.codes.clear()  # the code expired on GitHub's side
    answer = admin_client.get(path)
    assert answer.status_code == 400
    text = answer.content.decode()
    assert "GitHub refused to hand over the new App (404: Not Found)" in text
    assert "Nothing was stored" in text
    assert stored() == {}
    assert not AuditEntry.objects.filter(action="github.app_connect").exists()


def test_the_environment_still_wins_and_the_page_says_so(admin_client, bare_github, settings):
    settings.GITHUB_APP_ID = "4242"
    settings.GITHUB_WEBHOOK_SECRET = "from-the-environment"
    path, _ = connect(admin_client, bare_github)
    answer = admin_client.get(path, follow=True).content.decode()
    assert "The environment still sets GITHUB_APP_ID, GITHUB_WEBHOOK_SECRET" in answer
    app = next(iter(bare_github.apps.values()))
    assert stored()["GITHUB_APP_ID"] == str(app.id)  # kept, but not in force
    assert app_settings.app_id() == "4242"
    assert app_settings.webhook_secret() == "from-the-environment"
    page = admin_client.get("/settings/github/").content.decode()
    assert "The environment sets GITHUB_APP_ID, GITHUB_WEBHOOK_SECRET" in page
    assert "from-the-environment" not in page
    assert manifest.overridden() == ["GITHUB_APP_ID", "GITHUB_WEBHOOK_SECRET"]


def test_github_enterprise_server_and_organization_addresses(admin_client, bare_github):
    assert app_settings.api_url_for("https://github.com") == "https://api.github.com"
    assert app_settings.api_url_for("https://ghe.example.com/") == "https://ghe.example.com/api/v3"
    assert app_settings.api_url() == "https://api.github.com"  # nothing set: GitHub.com
    action, _ = manifest_flow.start(
        admin_client, web_url="https://ghe.example.com/", organization="octo-org"
    )
    assert action.startswith(
        "https://ghe.example.com/organizations/octo-org/settings/apps/new?state="
    )
    action, _ = manifest_flow.start(admin_client, web_url="https://github.com")
    assert action.startswith("https://github.com/settings/apps/new?state=")
    # An organization's App on the stand-in (GHES-shaped: API under /api/v3).
    path, _ = connect(admin_client, bare_github, organization="octo-org")
    admin_client.get(path)
    app = next(iter(bare_github.apps.values()))
    assert app.owner == "octo-org"
    assert AuditEntry.objects.get(action="github.app_connect").data["owner"] == "octo-org"


def test_bad_connect_input_is_shown_on_the_form(admin_client):
    answer = admin_client.post(
        "/settings/github/connect/",
        {"name": "x", "web_url": "not a url", "organization": "bad org!"},
    )
    assert answer.status_code == 400
    text = answer.content.decode()
    assert "Give GitHub&#x27;s address as https://HOST" in text
    assert "An organization&#x27;s login has letters, digits and &#x27;-&#x27;." in text


def test_only_site_admins_open_the_github_settings(client, team):
    for user in (team.engineer, team.manager, team.outsider):
        client.force_login(user)
        assert client.get("/settings/github/").status_code == 403
        start = {"web_url": "https://github.com", "name": "x"}
        assert client.post("/settings/github/connect/", start).status_code == 403
    client.logout()
    assert client.get("/settings/github/").status_code == 302  # to the login page


def test_the_cli_adds_through_the_same_action(admin_client, bare_github, inspect_cli):
    path, _ = connect(admin_client, bare_github)
    admin_client.get(path)
    app = next(iter(bare_github.apps.values()))
    manifest_flow.install(bare_github, app.slug, "octo-org/gizmos")
    site_settings.forget()
    code, out, err = inspect_cli("github", "link", "gizmos", "octo-org/gizmos")
    assert code == 0, err
    # The clone URL from the stored web address; the default branch detected, not assumed.
    assert f", {bare_github.url}/octo-org/gizmos.git, branch master)" in out
    assert Repository.objects.get(name="gizmos").default_branch == "master"
    assert AuditEntry.objects.filter(action="github.link", repository__name="gizmos").exists()
    code, out, err = inspect_cli("github", "link", "other", "octo-org/nowhere")
    assert code == 1 and "the GitHub App is not installed on octo-org/nowhere (404" in err
    assert not Repository.objects.filter(name="other").exists()
    assert bare_github.problems == []


def test_an_api_url_pinned_by_the_environment_is_the_one_used(admin_client, bare_github, settings):
    settings.GITHUB_API_URL = bare_github.url  # GitHub.com-shaped: the API at the root
    path, _ = connect(admin_client, bare_github)
    assert admin_client.get(path).status_code == 302
    assert bare_github.calls("POST", r"/app-manifests/[^/]+/conversions")
    assert not bare_github.calls("POST", r"/api/v3/.*")
    assert stored()["GITHUB_API_URL"] == bare_github.url  # where this App lives
    assert app_settings.api_url() == bare_github.url


def test_secrets_that_cannot_be_sealed_store_nothing(admin_client, bare_github, settings):
    path, _ = connect(admin_client, bare_github)
    settings.SECRETS_KEY = ""
    answer = admin_client.get(path)
    assert answer.status_code == 400
    app = next(iter(bare_github.apps.values()))
    text = answer.content.decode()
    assert f"GitHub created the App {app.slug} but its key and secrets cannot be stored" in text
    assert "INSPECT_SECRETS_KEY is not set" in text
    assert stored() == {}
    assert not AuditEntry.objects.filter(action="github.app_connect").exists()


def test_an_unusable_key_is_said_on_the_page(admin_client, settings):
    settings.GITHUB_APP_ID = "12"
    settings.GITHUB_APP_PRIVATE_KEY = (
        "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----\n"
    )
    page = admin_client.get("/settings/github/")
    assert page.status_code == 200
    assert "the GitHub App&#x27;s id and private key cannot make a token" in page.content.decode()


def test_a_webhook_secret_stored_by_the_flow_is_used_without_restart(client, team, settings):
    """The webhook endpoint reads the stored secret at once (no restart, no environment)."""
    from tests.integrations.github.conftest import sign

    settings.GITHUB_WEBHOOK_SECRET = ""
    site_settings.forget()
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d-1"}

    def post(secret: str):
        return client.post(
            "/webhooks/github/", data=body, content_type="application/json",
            headers={**headers, "X-Hub-Signature-256": sign(body, secret)},
        )  # fmt: skip

    assert post("stored-secret").status_code == 401  # nothing configured yet
    site_settings.store("GITHUB_WEBHOOK_SECRET", "stored-secret", by=team.admin)
    assert post("stored-secret").json() == {"outcome": "pong"}
    assert post("another-secret").status_code == 401
    settings.SECRETS_KEY = "k" * 44  # not the key it was sealed with
    site_settings.forget()
    answer = post("stored-secret")
    assert answer.status_code == 503
    assert answer.json() == {"outcome": "the webhook secret stored here cannot be decrypted"}
