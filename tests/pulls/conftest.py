"""GitHub fixtures: a repository linked to GitHub, a session with its PR there, and signed
replays of GitHub's published webhook payloads."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "It's a Secret to Everybody"
CODERTOCAT_ID = 21031067


def payload(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


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
    from sessions import services
    from sessions.models import GitHubLink, PullRequest, Session

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
