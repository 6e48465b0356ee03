"""GitHub fixtures: a repository linked to GitHub, a session with its PR there, a local GitHub
(github_fake.py) and signed replays of GitHub's published webhook payloads (fixtures/)."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "It's a Secret to Everybody"
CODERTOCAT_ID = 21031067
REPO = "octo-org/widgets"
RECIPE = 'setup = ["true"]\nverify = ["echo checked"]\n'


@pytest.fixture(autouse=True)
def fresh_site_settings():
    """No stored GitHub setting read by one test is served from the cache to the next."""
    from inspect_web import site_settings

    site_settings.forget()
    yield
    site_settings.forget()


def payload(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def status_event(pr, *, state: str = "failure", sha: str = "", context: str = "ci/build",
                 description: str = "2 tests failed") -> dict:  # fmt: skip
    """GitHub's `status` webhook (the commit-statuses CI kind) about commit `sha` (default: the
    PR's head) of the branch of `pr` in Codertocat/Hello-World."""
    sha = sha or pr.head_sha
    data = payload("pull_request_opened")
    return {
        "id": 6805126730, "sha": sha, "name": "Codertocat/Hello-World",
        "target_url": f"https://ci.example.com/builds/{sha[:7]}", "context": context,
        "description": description, "state": state,
        "commit": {"sha": sha, "node_id": "MDY6Q29tbWl0MTg2ODUzMDAy", "commit": {"message": ""}},
        "branches": [{"name": pr.branch, "commit": {"sha": sha}, "protected": False}],
        "created_at": "2019-05-15T15:20:55Z", "updated_at": "2019-05-15T15:20:55Z",
        "repository": data["repository"], "sender": data["sender"],
        "installation": {"id": 1},
    }  # fmt: skip


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture
def deliver(client, settings):
    """POST a payload to /webhooks/github/ as GitHub does (signed unless told otherwise)."""
    settings.GITHUB_WEBHOOK_SECRET = SECRET
    counter = iter(range(1, 10_000))

    def post(event: str, data: dict, *, delivery: str | None = None, signature: str | None = "",
             secret: str = SECRET):  # fmt: skip
        body = json.dumps(data).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or f"72d3162e-cc78-11e3-81ab-{next(counter):012d}",
            "User-Agent": "GitHub-Hookshot/044aadd",
        }
        if signature == "":
            headers["X-Hub-Signature-256"] = sign(body, secret)
        elif signature is not None:
            headers["X-Hub-Signature-256"] = signature
        return client.post(
            "/webhooks/github/", data=body, content_type="application/json", headers=headers
        )

    return post


@pytest.fixture
def github_pr(team):
    """Session of the engineer whose pull request is Codertocat/Hello-World#2 on GitHub."""
    from integrations.github.models import GitHubLink
    from sessions import services
    from sessions.models import PullRequest, Session

    GitHubLink.objects.create(
        repository=team.repository, full_name="Codertocat/Hello-World", installation_id=1
    )
    session = services.session_create(
        repository=team.repository, creator=team.engineer, prompt="fix the README spelling",
        agent_command="true",
    )  # fmt: skip
    Session.objects.filter(pk=session.pk).update(state="pr_open")
    return PullRequest.objects.create(
        session=session, repository=team.repository, host="github", number=2,
        url="", branch=f"inspect/{session.pk}-fix-the-readme-spelling", base="master",
        title="fix the README spelling", author=team.engineer,
        head_sha="ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    )  # fmt: skip


@pytest.fixture
def codertocat(team):
    """The reviewer signed in here with GitHub as Codertocat."""
    from allauth.socialaccount.models import SocialAccount

    SocialAccount.objects.create(
        user=team.reviewer, provider="github", uid=str(CODERTOCAT_ID),
        extra_data={"login": "Codertocat", "id": CODERTOCAT_ID},
    )  # fmt: skip
    return team.reviewer


@pytest.fixture(scope="session")
def app_key() -> tuple[str, str]:
    """A GitHub App private key (PEM) and its public half, made for this test run."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@pytest.fixture
def github_server(settings, tmp_path, app_key, make_git_repo):
    """A local GitHub hosting octo-org/widgets with the App (id 4242) installed on it."""
    from integrations.github.codehost import GitHubHost
    from tests.integrations.github.github_fake import FakeGitHub

    private, public = app_key
    fake = FakeGitHub(tmp_path / "github", app_id=4242, public_key=public).start()
    settings.GITHUB_APP_ID = "4242"
    settings.GITHUB_APP_PRIVATE_KEY = private
    settings.GITHUB_API_URL = fake.url
    settings.AUTO_PULL_REQUEST = True
    GitHubHost._tokens.clear()
    upstream = make_git_repo(
        files={"README.md": "# widgets\n", ".inspect/environment.toml": RECIPE}
    )
    fake.clone_url = fake.add_repo(REPO, upstream.path)
    yield fake
    fake.stop()


@pytest.fixture
def github(github_server, team, inspect_cli):
    """`widgets` linked to octo-org/widgets, with a ready snapshot (cloned over HTTP with an
    installation token)."""
    from integrations.github.models import GitHubLink

    team.repository.url = github_server.clone_url
    team.repository.save()
    GitHubLink.objects.create(repository=team.repository, full_name=REPO)
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    return github_server


@pytest.fixture
def bare_github(settings, tmp_path, make_git_repo):
    """A local GitHub with no App yet (Connect GitHub creates one), hosting octo-org/gizmos
    whose default branch is `master`, and no GitHub setting from the environment."""
    from integrations.github.codehost import GitHubHost
    from tests.integrations.github.github_fake import FakeGitHub

    for name in ("GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET",
                 "GITHUB_OAUTH_CLIENT_ID", "GITHUB_OAUTH_CLIENT_SECRET"):  # fmt: skip
        setattr(settings, name, "")
    settings.GITHUB_APP_SLUG = "inspect-web"
    settings.GITHUB_API_URL = "https://api.github.com"
    settings.GITHUB_WEB_URL = "https://github.com"
    GitHubHost._tokens.clear()
    fake = FakeGitHub(tmp_path / "github").start()
    upstream = make_git_repo(
        "gizmos", files={"README.md": "# gizmos\n", ".inspect/environment.toml": RECIPE}
    )
    upstream.git("branch", "-m", "main", "master")
    fake.add_repo("octo-org/gizmos", upstream.path, installation=None)
    yield fake
    fake.stop()
