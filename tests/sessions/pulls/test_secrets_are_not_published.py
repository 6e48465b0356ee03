"""A repository secret the agent can read never leaves the platform inside a pull request: the
commits are checked before the push, history included."""

import secrets as random

import pytest
from cryptography.fernet import Fernet

from approvals.models import RepositorySecret
from approvals.secrets import secret_set
from sessions.models import Event, PullRequest, Session

pytestmark = pytest.mark.django_db

TOKEN = "tok-" + random.token_hex(16)


@pytest.fixture
def with_secret(publishing, settings, team):
    settings.SECRETS_KEY = Fernet.generate_key().decode()
    secret_set(repository=publishing, name="DEPLOY_TOKEN", value=TOKEN,
               scope=RepositorySecret.Scope.AGENT, by=team.admin)  # fmt: skip
    return publishing


def test_a_change_holding_a_secret_is_not_pushed_and_the_session_says_why(
    with_secret, create_session, inspect_cli
):
    leak = (
        'if [ "$INSPECT_PROMPT" = "drop it" ]; then echo "token=" > settings.ini; '
        'else echo "token=$DEPLOY_TOKEN" > settings.ini; fi'
    )
    code, summary, err = create_session("--prompt", "write the settings", "--agent-command", leak,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert summary["diff"]["paths"] == ["settings.ini"]  # the work is kept in the session
    assert not PullRequest.objects.filter(session_id=summary["id"]).exists()
    assert Session.objects.get(pk=summary["id"]).state == "idle"
    error = Event.objects.get(session_id=summary["id"], kind="error", payload__phase="publish")
    assert "contain the value of the repository secret DEPLOY_TOKEN" in error.payload["message"]
    assert TOKEN not in str(error.payload)
    assert "inspect/" not in with_secret.upstream.git("branch", "--list", "--all")

    # Overwriting the value in a later turn is not enough: the first commit still holds it.
    code, out, err = inspect_cli("session", "prompt", str(summary["id"]), "drop it", "--inline")
    assert code == 0, err
    assert Session.objects.get(pk=summary["id"]).diff_stats["files"] == 1
    assert Event.objects.filter(session_id=summary["id"], kind="error").count() == 2
    assert not PullRequest.objects.filter(session_id=summary["id"]).exists()
    assert "inspect/" not in with_secret.upstream.git("branch", "--list", "--all")


def test_a_change_without_the_secret_is_published(with_secret, create_session):
    safe = 'test -n "$DEPLOY_TOKEN" && echo "token length ${#DEPLOY_TOKEN}" > settings.ini'
    code, summary, err = create_session("--prompt", "write the settings", "--agent-command", safe,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    assert with_secret.upstream.git("show", f"{pr.branch}:settings.ini") == "token length 36\n"
