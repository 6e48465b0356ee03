"""Connect GitHub in a real browser against the GitHub stand-in: Connect → GitHub's create page
→ back with the App stored sealed → install it → add a repository (default branch `master`,
detected) → its snapshot clones with an installation token."""

from __future__ import annotations

import pytest
from django.conf import settings

from inspect_web import site_settings
from inspect_web.models import SiteSetting
from integrations.github.models import GitHubLink
from snapshots.models import Repository
from tests.browser.conftest import screenshot
from tests.integrations.github.conftest import bare_github  # noqa: F401
from tests.sessions.stream.conftest import running_daphne

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def github_site(transactional_db, tmp_path, collected_static):
    """daphne sealing with this process's INSPECT_SECRETS_KEY, so both read what either
    stored."""
    (tmp_path / "static").symlink_to(collected_static, target_is_directory=True)
    site_settings.forget()
    with running_daphne(tmp_path / "daphne.log", INSPECT_SECRETS_KEY=settings.SECRETS_KEY) as s:
        yield s.http_url.rstrip("/")
    site_settings.forget()  # what this test stored is gone; so must be any cached read of it


@pytest.fixture
def open_as(browser, github_site):
    from django.test import Client

    contexts = []

    def open_page(user):
        client = Client()
        client.force_login(user)
        context = browser.new_context(base_url=github_site, viewport={"width": 1280, "height": 900})
        name = settings.SESSION_COOKIE_NAME
        context.add_cookies(
            [{"name": name, "value": client.cookies[name].value, "url": github_site}]
        )
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


def test_connect_github_install_and_add_a_repository(
    open_as,
    github_site,
    bare_github,  # noqa: F811
    team,
    inspect_cli,
):
    page = open_as(team.admin)
    page.goto("/settings/github/")
    assert page.locator("tr[data-setting=GITHUB_APP_ID] .source").inner_text() == "default"
    page.get_by_label("GitHub address").fill(bare_github.url)
    page.get_by_label("App name").fill("Inspect Browser")
    page.get_by_role("button", name="Connect GitHub").click()

    # The stand-in's "Create GitHub App" page, from the manifest this site posted.
    page.wait_for_url(f"{bare_github.url}/settings/apps/new?state=*")
    assert "contents: write" in page.locator("ul.permissions").inner_text()
    assert f"{github_site}/webhooks/github/" in page.content()
    screenshot(page, "settings-github-create-app")
    page.get_by_role("button", name="Create GitHub App for octocat").click()

    page.wait_for_url(f"{github_site}/settings/github/")
    app = next(iter(bare_github.apps.values()))
    assert f"GitHub App Inspect Browser ({app.slug}, id {app.id}) connected" in (
        page.locator(".messages").inner_text()
    )
    assert page.locator("tr[data-setting=GITHUB_APP_ID] td").first.inner_text() == str(app.id)
    assert "Inspect Browser, owned by octocat" in page.locator(".github-app-owner").inner_text()
    assert page.locator("tr[data-setting=GITHUB_APP_ID] .source").inner_text() == "settings page"
    assert "PRIVATE KEY" not in page.content() and app.webhook_secret not in page.content()
    rows = dict(SiteSetting.objects.values_list("name", "value"))
    assert rows["GITHUB_APP_ID"] == str(app.id)
    for name in ("GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET", "GITHUB_OAUTH_CLIENT_SECRET"):
        assert rows[name].startswith("fernet:"), name

    # Install it on GitHub (the stand-in's page), which sends the admin back here.
    page.get_by_role("link", name="Install the App on repositories").click()
    page.wait_for_url(f"{bare_github.url}/apps/{app.slug}/installations/new")
    page.get_by_label("octo-org/gizmos").check()
    page.get_by_role("button", name="Install").click()
    page.wait_for_url(f"{github_site}/settings/github/?installation_id=*")
    row = page.locator('tr[data-repository="octo-org/gizmos"]')
    assert row.locator("td").nth(1).inner_text() == "master"
    screenshot(page, "settings-github-installed")
    row.get_by_role("button", name="Add").click()

    page.wait_for_url(f"{github_site}/settings/github/")
    assert "Added gizmos from octo-org/gizmos (default branch master)" in (
        page.locator(".messages").inner_text()
    )
    assert "added as gizmos" in page.locator('tr[data-repository="octo-org/gizmos"]').inner_text()
    repository = Repository.objects.get(name="gizmos")
    assert repository.default_branch == "master"
    assert GitHubLink.objects.get(repository=repository).full_name == "octo-org/gizmos"

    # A session's clone: the snapshot is built from a mirror fetched with an installation
    # token of the App stored above (the stand-in answers git only with one).
    site_settings.forget()
    fetches = len(bare_github.calls("GET", "/octo-org/gizmos.git/info/refs"))
    code, out, err = inspect_cli("snapshot", "refresh", "gizmos", "--json")
    assert code == 0, err
    assert len(bare_github.calls("GET", "/octo-org/gizmos.git/info/refs")) > fetches
    assert bare_github.problems == []
