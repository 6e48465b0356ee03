"""A new admin's first hour, in a real browser and only through the pages (issue 18): log in →
connect the (stand-in) GitHub App and install it on acme/hello (default branch `master`) → add
the repository → connect an OpenAI-compatible model (the stand-in model) and test it → invite an
engineer by e-mail (who signs up through the link) and a reviewer by username → add a secret,
edit the recipe and build it live → the engineer runs a session with the built-in agent, whose
pull request opens on the stand-in → the reviewer approves the merge → merged on GitHub.

Real parts: daphne, a Celery worker, the model gateway process, bubblewrap sandboxes, the GitHub
stand-in (git over HTTP, the App's manifest flow, installation tokens) and the stand-in model.
The test process writes to the database only to create the first admin and the reviewer's
existing account; everything after that is done by pressing buttons."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import expect

from accounts.models import Membership
from approvals.models import ApprovalRequest, RepositorySecret
from gateway.models import ModelRequest
from inspect_web import site_settings
from integrations.github.codehost import GitHubHost
from integrations.github.models import GitHubLink
from sessions.models import PullRequest, Session
from settings_area.checklist import first_run_steps
from snapshots.models import Repository
from tests.browser.conftest import screenshot
from tests.gateway.conftest import start_gateway  # noqa: F401
from tests.integrations.github.github_fake import FakeGitHub, _git
from tests.standin_model import StandinModel

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
ENGINEER_PASSWORD = "a long enough passphrase 42"
SECRET_VALUE = "hello-token-5c1e9a"
# Setup proves the secret reaches it (without printing it); verify checks the agent's work.
RECIPE = (
    'setup = ["test -n \\"$HELLO_TOKEN\\" && echo token-present"]\n'
    'verify = ["grep -qx hello greeting.txt"]\n'
)
LONG = 90_000  # a build, a turn or a merge on a loaded 2-core machine


@pytest.fixture
def acme_github(settings, tmp_path, make_git_repo):
    """The GitHub stand-in with no App yet, hosting acme/hello (default branch `master`), and
    no GitHub setting from the environment (the settings pages' values are in force)."""
    for name in ("GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET",
                 "GITHUB_OAUTH_CLIENT_ID", "GITHUB_OAUTH_CLIENT_SECRET"):  # fmt: skip
        setattr(settings, name, "")
    settings.GITHUB_API_URL = "https://api.github.com"
    settings.GITHUB_WEB_URL = "https://github.com"
    GitHubHost._tokens.clear()
    site_settings.forget()
    fake = FakeGitHub(tmp_path / "github").start()
    upstream = make_git_repo("hello", files={"README.md": "# hello\n"})
    upstream.git("branch", "-m", "main", "master")
    fake.add_repo("acme/hello", upstream.path, installation=None)
    yield fake
    fake.stop()
    site_settings.forget()


@pytest.fixture
def model_server():
    """The stand-in model, as a local OpenAI-compatible server that needs no key."""
    with StandinModel(key=None) as model:
        yield model


@pytest.fixture
def no_model_in_env(settings):
    settings.LLM_API_KEY = settings.ANTHROPIC_API_KEY = settings.LLM_MODEL = ""
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    settings.ANTHROPIC_BASE_URL = "https://api.anthropic.com"
    settings.LLM_PROVIDER = "auto"


def _log_in(browser, base: str, username: str, password: str):
    """A fresh browser context, logged in through the login form."""
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto("/accounts/login/")
    page.locator("input[name=login]").fill(username)
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name="Log in", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Welcome, {username}")
    return context, page


def _main_nav(page, label: str) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name=label, exact=True).click()


def _settings_tab(page, label: str, *, repository: bool = False) -> None:
    nav = page.get_by_role("navigation", name="Settings")
    # Site sections come first, then the repository's (both have a "Models").
    links = nav.get_by_role("link", name=label, exact=True)
    (links.last if repository else links.first).click()


def _checklist(page) -> dict[str, str]:
    items = page.locator("section.checklist li")
    return {
        item.locator("a, strong").first.inner_text(): item.locator(".state").inner_text()
        for item in items.all()
    }


def test_a_new_admin_goes_from_log_in_to_a_merged_first_session(
    browser,
    live_server_url,
    acme_github,
    model_server,
    no_model_in_env,
    start_gateway,  # noqa: F811
    start_celery,
    settings,
):
    base, _ = live_server_url
    users = get_user_model()
    # `createsuperuser`, and an account that exists already. Hashed as the site hashes (this
    # process's test hasher is not one daphne knows), with fewer rounds: a test needs no more.
    hashed = PBKDF2PasswordHasher().encode(PASSWORD, "first-hour-salt", iterations=1000)
    users.objects.create_superuser("ada", "ada@acme.test", password=None)
    users.objects.create_user("rita", "rita@acme.test", password=None)
    users.objects.filter(username__in=["ada", "rita"]).update(password=hashed)
    # The platform's processes, as `make run` starts them: the gateway (the Models page's
    # provider, no key from the environment) and a worker that reaches it.
    gateway = start_gateway(
        "https://api.anthropic.com", "https://api.openai.com/v1",
        ANTHROPIC_API_KEY="", INSPECT_LLM_API_KEY="",
        INSPECT_GATEWAY_SOCKET=str(settings.DATA_DIR / "gateway" / "gateway.sock"),
    )  # fmt: skip
    settings.AUTO_PULL_REQUEST = True  # before the worker starts: it reads it from its env
    start_celery("worker", INSPECT_GATEWAY_PORT=gateway.url.rsplit(":", 1)[1])
    contexts = []
    try:
        session = _journey(browser, base, acme_github, model_server, contexts)
    finally:
        for context in contexts:
            context.close()
    # The outcome: the engineer's change, approved by the reviewer, is on `master`.
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.decided_by.username == "rita" and approval.requested_by.username == "eve"
    assert PullRequest.objects.get(session=session).state == "merged"
    assert _git(acme_github.repo("acme/hello").path, "show", "master:greeting.txt") == "hello"
    assert acme_github.problems == []


def _journey(browser, base, github, model, contexts) -> Session:
    # 1. The admin logs in: the Getting-started checklist, every step to do.
    context, admin = _log_in(browser, base, "ada", PASSWORD)
    contexts.append(context)
    errors: list[str] = []
    admin.on("pageerror", lambda exc: errors.append(str(exc)))
    expect(admin.get_by_role("heading", name="Getting started")).to_be_visible()
    steps = _checklist(admin)
    assert len(steps) == 5 and set(steps.values()) == {"To do"}, steps
    screenshot(admin, "first-hour-1-checklist")

    # 2. Settings › GitHub: Connect GitHub (the manifest flow), then install the App.
    _main_nav(admin, "Settings")
    _settings_tab(admin, "GitHub")
    admin.get_by_label("GitHub address").fill(github.url)
    admin.get_by_label("App name").fill("Acme Inspect")
    admin.get_by_role("button", name="Connect GitHub").click()
    admin.wait_for_url(f"{github.url}/settings/apps/new?state=*")
    admin.get_by_role("button", name="Create GitHub App for octocat").click()
    admin.wait_for_url(f"{base}/settings/github/")
    app = next(iter(github.apps.values()))
    expect(admin.locator(".messages")).to_contain_text(f"GitHub App Acme Inspect ({app.slug}")
    admin.get_by_role("link", name="Install the App on repositories").click()
    admin.wait_for_url(f"{github.url}/apps/{app.slug}/installations/new")
    admin.get_by_label("acme/hello").check()
    admin.get_by_role("button", name="Install").click()
    admin.wait_for_url(f"{base}/settings/github/?installation_id=*")
    row = admin.locator('tr[data-repository="acme/hello"]')
    expect(row.locator("td").nth(1)).to_have_text("master")
    screenshot(admin, "first-hour-2-github-installed")

    # 3. Add acme/hello from the installation; Settings › Repositories lists it on `master`.
    row.get_by_role("button", name="Add").click()
    expect(admin.locator(".messages")).to_contain_text(
        "Added hello from acme/hello (default branch master)"
    )
    _settings_tab(admin, "Repositories")
    expect(admin.locator("tr", has_text="hello")).to_contain_text("master")
    repository = Repository.objects.get(name="hello")
    assert repository.default_branch == "master"
    assert GitHubLink.objects.get(repository=repository).full_name == "acme/hello"
    screenshot(admin, "first-hour-3-repositories")

    # 4. Settings › Models: the stand-in as an OpenAI-compatible server; Test; the
    # repository's default model.
    _settings_tab(admin, "Models")
    compatible = admin.locator("section#compatible")
    compatible.locator("#compatible-url").fill(model.openai_url)
    compatible.get_by_role("button", name="Connect").click()
    expect(admin.locator("section#compatible .state")).to_have_text("connected")
    admin.locator("section#compatible").get_by_role("button", name="Test").click()
    # No key typed (a local server needs none): the page does not claim one was accepted.
    expect(admin.locator("section#compatible .test-result")).to_contain_text(
        f"OK: {model.openai_url} answered: "
    )
    screenshot(admin, "first-hour-4-model-tested")
    admin.goto("/settings/repositories/hello/")
    _settings_tab(admin, "Models", repository=True)
    admin.fill("#default-model", "gpt-4.1")
    admin.locator("#default-model-section").get_by_role("button", name="Save").click()
    expect(admin.get_by_role("status")).to_contain_text("New sessions that name no model use it")

    # 5. Settings › People: an engineer by e-mail (signs up through the link), a reviewer by
    # username.
    _settings_tab(admin, "People", repository=True)
    admin.get_by_label("Username or e-mail").fill("eve@acme.test")
    admin.get_by_label("Role", exact=True).select_option("engineer")
    admin.get_by_role("button", name="Invite").click()
    link = admin.get_by_label("Invitation link").input_value()
    admin.get_by_label("Username or e-mail").fill("rita")
    admin.get_by_label("Role", exact=True).select_option("reviewer")
    admin.get_by_role("button", name="Invite").click()
    expect(admin.locator(".messages")).to_contain_text("rita is now reviewer")
    screenshot(admin, "first-hour-5-people")

    engineer_context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    contexts.append(engineer_context)
    engineer = engineer_context.new_page()
    engineer.goto(link)
    expect(engineer.locator("main")).to_contain_text("invited eve@acme.test to join hello")
    engineer.get_by_role("link", name="Create an account").click()
    expect(engineer.locator("input[name=email]")).to_have_value("eve@acme.test")
    engineer.locator("input[name=username]").fill("eve")
    engineer.locator("input[name=password1]").fill(ENGINEER_PASSWORD)
    engineer.locator("input[name=password2]").fill(ENGINEER_PASSWORD)
    engineer.locator("form", has=engineer.locator("input[name=username]")).locator(
        "button[type=submit]"
    ).click()
    engineer.get_by_role("button", name="Join hello as eve").click()
    expect(engineer.locator(".messages")).to_contain_text("You are now engineer on hello")
    roles = dict(
        Membership.objects.filter(repository=repository).values_list("user__username", "role")
    )
    assert roles == {"ada": "admin", "eve": "engineer", "rita": "reviewer"}, roles

    # 6. Settings › Secrets: a secret; Settings › Recipe: the override, saved, built live.
    _settings_tab(admin, "Secrets", repository=True)
    admin.fill("#id_name", "HELLO_TOKEN")
    admin.select_option("#id_scope", "setup_start")
    admin.fill("#id_value", SECRET_VALUE)
    admin.click("text=Save secret")
    expect(admin.locator(".messages")).to_contain_text("Secret HELLO_TOKEN of hello saved")
    assert RepositorySecret.objects.filter(name="HELLO_TOKEN").exists()
    _settings_tab(admin, "Recipe", repository=True)
    admin.locator("#id_text").fill(RECIPE)
    expect(admin.locator("#recipe-check")).to_contain_text("Valid.")
    admin.locator("#save-recipe").click()
    expect(admin.locator(".messages")).to_contain_text("Recipe of hello saved.")
    admin.click("#build-now")
    log = admin.locator("#build-log")
    # The line setup printed (not the command's own echo): the secret reached setup.
    printed = log.locator(".build-line", has_text=re.compile(r"^token-present$"))
    expect(printed).to_be_visible(timeout=LONG)
    expect(admin.locator("#build-final")).to_have_attribute("data-state", "ready", timeout=LONG)
    assert SECRET_VALUE not in admin.content()
    screenshot(admin, "first-hour-6-built")
    admin.get_by_role("link", name="Inspect Web").click()
    steps = _checklist(admin)
    assert steps.pop("Run a first session") == "To do"
    assert set(steps.values()) == {"Done"}, steps

    # 7. The engineer: New task, the built-in agent against the stand-in model; the PR opens.
    _main_nav(engineer, "New task")
    engineer.locator("select[name=repository]").select_option(label="hello")
    engineer.locator("textarea[name=prompt]").fill("create greeting.txt with hello")
    engineer.get_by_role("button", name="Start session").click()
    engineer.wait_for_url("**/sessions/*/")
    merge = engineer.locator("#pull-request button", has_text="Request merge")
    expect(merge).to_be_visible(timeout=LONG)
    expect(engineer.locator("#log-events")).to_contain_text("greeting.txt")
    screenshot(engineer, "first-hour-7-pull-request")
    merge.click()
    expect(engineer.locator(".messages")).to_contain_text("Merge requested")
    session = Session.objects.get(repository=repository)
    assert session.creator.username == "eve"
    # The agent's model calls went through the gateway (metered, on the repository's default
    # model) to the server the Models page names, which ran the change.
    assert model.tool_calls() == ["printf '%s\\n' 'hello' > greeting.txt"]
    metered = ModelRequest.objects.filter(session=session)
    assert metered.exists() and set(metered.values_list("model", flat=True)) == {"gpt-4.1"}
    pull = github.repo("acme/hello").pulls[0]
    assert pull["state"] == "open" and pull["base"]["ref"] == "master"

    # 8. The reviewer: Approvals → Decide → Approve; merged on GitHub, the session shows it.
    reviewer_context, reviewer = _log_in(browser, base, "rita", PASSWORD)
    contexts.append(reviewer_context)
    _main_nav(reviewer, "Approvals")
    reviewer.locator("#pending").get_by_role("link", name="Decide").click()
    expect(reviewer.locator("main")).to_contain_text("greeting.txt")
    screenshot(reviewer, "first-hour-8-approval")
    reviewer.get_by_role("button", name="Approve").click()
    reviewer.goto(session.get_absolute_url())
    expect(reviewer.locator("#session-state")).to_have_text("merged", timeout=LONG)
    screenshot(reviewer, "first-hour-8-merged")
    assert pull["state"] == "closed" and pull["merged"] is True

    # Every step done: the checklist has nothing left to show.
    admin.reload()
    expect(admin.locator("section.checklist")).to_have_count(0)
    assert first_run_steps(get_user_model().objects.get(username="ada")) == []
    screenshot(admin, "first-hour-9-done")
    assert errors == []
    return session
