"""A repository on GitHub (a local server speaking GitHub's REST API and git over HTTP): the
turn's branch is pushed and one PR opened with an installation token scoped to the repository;
its review and merge are tracked by webhook; refused tokens and a revoked App are clear errors."""

import json
from datetime import UTC, datetime

import pytest
from cryptography.fernet import Fernet

from approvals import gate
from integrations.github.models import GitHubLink
from sessions.models import Event, PullRequest, ReviewEvent, Session
from tests.integrations.github.conftest import REPO
from tests.integrations.github.github_fake import _git


@pytest.fixture
def secrets_key(settings):
    """GitHub user tokens are stored encrypted with the secrets key (approvals.oauth_tokens)."""
    settings.SECRETS_KEY = Fernet.generate_key().decode()
    return settings.SECRETS_KEY


# Committed: a first turn fetches the mirror on a thread of its own (its own connection), which
# must see the repository's GitHub link to fetch with a token.
pytestmark = pytest.mark.django_db(transaction=True)

AGENT = 'printf "hello from $INSPECT_AUTHOR\\n" > greeting.txt'


def start(create_session, *more: str) -> dict:
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer", *more)  # fmt: skip
    assert code == 0, err
    return summary


def test_a_turn_opens_one_pull_request_and_a_retry_opens_no_second(
    github, create_session, inspect_cli, client, team
):
    summary = start(create_session)
    assert summary["state"] == "pr_open"
    pr = PullRequest.objects.get(session_id=summary["id"])
    assert (pr.host, pr.number, pr.opened_as_app) == ("github", 1, True)
    assert pr.url == f"https://github.com/{REPO}/pull/1"
    client.force_login(team.engineer)
    page = client.get(f"/sessions/{pr.session_id}/").content.decode()
    assert f'<a href="{pr.url}" rel="noopener">open on GitHub</a>' in page
    assert "opened as the App" in page and "Request merge" in page
    bare = github.repo(REPO).path
    assert _git(bare, "show", f"{pr.branch}:greeting.txt") == "hello from engineer"
    assert _git(bare, "rev-parse", pr.branch) == pr.head_sha
    [pull] = github.repo(REPO).pulls
    assert (pull["head"]["ref"], pull["base"]["ref"], pull["title"]) == (
        pr.branch,
        "main",
        "add a greeting",
    )
    assert pull["user"]["type"] == "Bot" and "## Task\n\nadd a greeting" in pull["body"]
    assert GitHubLink.objects.get().installation_id == 77  # looked up once, then kept

    # The worker died after GitHub opened the PR but before it was recorded here: the next
    # turn adopts it instead of opening a second.
    PullRequest.objects.filter(pk=pr.pk).delete()
    code, out, err = inspect_cli("session", "prompt", str(summary["id"]), "more, please",
                                 "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert PullRequest.objects.get(session_id=summary["id"]).number == 1
    assert len(github.repo(REPO).pulls) == 1
    assert len(github.calls("POST", f"/repos/{REPO}/pulls")) == 1
    # A later turn brings the description up to date with what was asked since.
    code, out, err = inspect_cli("session", "prompt", str(summary["id"]), "and a farewell",
                                 "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    [patched] = github.calls("PATCH", f"/repos/{REPO}/pulls/1")
    assert set(patched["body"]) == {"body"} and "- and a farewell" in patched["body"]["body"]
    assert "- and a farewell" in github.repo(REPO).pulls[0]["body"]

    assert github.problems == []
    git = [r for r in github.requests if ".git/" in r["path"]]
    assert git and {r["auth"] for r in git} == {"Basic"}
    assert any(r["path"].endswith("git-receive-pack") for r in git)
    rest = [r for r in github.requests if r["path"].startswith("/repos/")
            and not r["path"].endswith("/installation")]  # fmt: skip
    assert rest and {r["auth"] for r in rest} == {"token"}
    minted = [t for t in github.tokens.values()]
    assert minted and all(t.repositories == ["widgets"] for t in minted)
    # Publishing's token, and the one that publishes the `Inspect / verify` check, no more.
    publishing, checks = {"contents": "write", "pull_requests": "write"}, {"checks": "write"}
    assert {json.dumps(t.permissions, sort_keys=True) for t in minted} == {
        json.dumps(publishing, sort_keys=True),
        json.dumps(checks, sort_keys=True),
    }
    # The token stays on the worker: nothing the session recorded carries it.
    logged = json.dumps(list(Event.objects.filter(session_id=summary["id"]).values("payload")))
    assert not any(t.value in logged for t in minted) and "ghs_" not in logged


def test_the_pr_is_opened_with_the_authors_own_github_token(
    github, create_session, team, secrets_key
):
    from allauth.socialaccount.models import SocialAccount, SocialToken

    account = SocialAccount.objects.create(
        user=team.engineer, provider="github", uid="583231", extra_data={"login": "ada"}
    )
    SocialToken.objects.create(account=account, token="gho_ada_user_token")
    github.user_tokens["gho_ada_user_token"] = "ada"
    pr = PullRequest.objects.get(session_id=start(create_session)["id"])
    assert pr.opened_as_app is False
    assert github.repo(REPO).pulls[0]["user"]["login"] == "ada"
    [opened] = github.calls("POST", f"/repos/{REPO}/pulls")
    assert opened["token"] == "gho_ada_user_token"
    assert github.problems == []


def test_a_revoked_github_login_falls_back_to_the_app_and_is_flagged(
    github, create_session, team, secrets_key
):
    from allauth.socialaccount.models import SocialAccount, SocialToken

    account = SocialAccount.objects.create(
        user=team.engineer, provider="github", uid="583231", extra_data={"login": "ada"}
    )
    SocialToken.objects.create(account=account, token="gho_revoked_on_github")
    pr = PullRequest.objects.get(session_id=start(create_session)["id"])
    assert pr.opened_as_app is True
    tried, opened = github.calls("POST", f"/repos/{REPO}/pulls")
    assert tried["token"] == "gho_revoked_on_github" and opened["token"].startswith("ghs_")
    [pull] = github.repo(REPO).pulls
    assert pull["user"]["type"] == "Bot"
    assert github.problems == []


def test_review_and_merge_are_tracked_by_webhook(
    github, create_session, team, deliver, codertocat, client
):
    from sessions.pulls import request_merge

    pr = PullRequest.objects.get(session_id=start(create_session)["id"])
    approved = github.webhook("pull_request_review", REPO, 1, review={
        "id": 80, "state": "approved", "commit_id": pr.head_sha,
        "submitted_at": "2026-01-05T10:00:00Z",
    })  # fmt: skip
    assert deliver("pull_request_review", approved).status_code == 200
    pr.refresh_from_db()
    assert pr.first_review_at == datetime(2026, 1, 5, 10, tzinfo=UTC) and pr.review_rounds == 1
    assert ReviewEvent.objects.get(pull_request=pr).reviewer == codertocat

    approval = request_merge(pr, team.engineer)
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    assert gate.execute_approval(approval.pk) == "executed"
    [merge] = github.calls("PUT", f"/repos/{REPO}/pulls/1/merge")
    assert merge["auth"] == "token" and merge["body"]["sha"] == pr.head_sha
    assert merge["body"]["merge_method"] == "merge"
    bare = github.repo(REPO).path
    assert _git(bare, "show", "main:greeting.txt") == "hello from engineer"
    pr.refresh_from_db()
    assert pr.state == "merged" and pr.merge_sha == _git(bare, "rev-parse", "main")
    assert Session.objects.get(pk=pr.session_id).state == "merged"

    # GitHub then tells us about the merge we made: recorded once already, nothing changes.
    merged = github.webhook("pull_request", REPO, 1, action="closed")
    assert deliver("pull_request", merged).status_code == 200
    merges = Event.objects.filter(session_id=pr.session_id, kind="pull_request_merged")
    assert merges.count() == 1
    assert github.problems == []

    # The Metrics page counts it: one session, one PR, merged after one review.
    client.force_login(team.manager)
    page = client.get("/metrics/", {"repository": "widgets"})
    assert "1 → 1 → 1" in page.content.decode() and "100.0%" in page.content.decode()


def test_on_github_enterprise_server_a_pr_is_opened_and_merged_under_its_api_v3(
    github, create_session, team, settings
):
    """The API root a GitHub address gives (GHES: https://HOST/api/v3) holds every call, the
    merge included (PyGithub follows the PR's own `url`, which GHES gives under /api/v3)."""
    from sessions.pulls import request_merge

    settings.GITHUB_API_URL = f"{github.url}/api/v3"
    earlier = len(github.requests)  # the fixture's clone, with the API at the root
    pr = PullRequest.objects.get(session_id=start(create_session)["id"])
    approval = request_merge(pr, team.engineer)
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    assert gate.execute_approval(approval.pk) == "executed"
    assert len(github.calls("PUT", f"/api/v3/repos/{REPO}/pulls/1/merge")) == 1
    rest = [r["path"] for r in github.requests[earlier:] if ".git/" not in r["path"]]
    assert rest and all(path.startswith("/api/v3/") for path in rest), rest
    pr.refresh_from_db()
    assert pr.state == "merged"
    assert github.problems == []


def test_a_merge_pressed_on_github_is_tracked_by_webhook(github, create_session, deliver):
    pr = PullRequest.objects.get(session_id=start(create_session)["id"])
    github.merge_on_github(REPO, 1)
    assert deliver("pull_request", github.webhook("pull_request", REPO, 1, action="closed")
                   ).json()["outcome"] == f"{REPO}#1 merged"  # fmt: skip
    pr.refresh_from_db()
    assert pr.state == "merged"
    assert pr.merge_sha == _git(github.repo(REPO).path, "rev-parse", "main")
    assert Session.objects.get(pk=pr.session_id).state == "merged"


def test_an_expired_token_is_refreshed_once_then_refusal_is_a_clear_error(
    github, create_session, inspect_cli
):
    # The token expires between the push and the PR: GitHub says "Bad credentials" once.
    github.before.append((f"GET /repos/{REPO}/pulls?", github.expire_tokens))
    summary = start(create_session)
    assert summary["state"] == "pr_open"
    pr = PullRequest.objects.get(session_id=summary["id"])
    refused = [r for r in github.calls("GET", f"/repos/{REPO}/pulls")]
    assert len(refused) == 2  # the refused call and its retry with a fresh token

    # From now on GitHub refuses every token, fresh ones too: one retry, then an error.
    def refuse_all():
        github.expire_tokens()
        github.mint_invalid = True

    github.before.append(("GET /octo-org/widgets.git/info/refs?service=git-receive-pack",
                          refuse_all))  # fmt: skip
    minted = len(github.tokens)
    code, out, err = inspect_cli("session", "prompt", str(summary["id"]), "more, please",
                                 "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert len(github.tokens) == minted + 1  # refreshed once, not in a loop
    error = Event.objects.filter(session_id=summary["id"], kind="error").get()
    assert error.payload["phase"] == "publish"
    assert (
        "refused the App's installation token for octo-org/widgets even after a fresh one"
        in (error.payload["message"])
    )
    assert "GITHUB_APP_PRIVATE_KEY" in error.payload["message"]
    pr.refresh_from_db()
    # The push failed, the PR opened earlier is still open: the session waits on it.
    assert pr.state == "open" and Session.objects.get(pk=summary["id"]).state == "pr_open"
    assert github.problems == []


def test_a_revoked_installation_is_a_clear_error_on_the_session(github, create_session):
    github.before.append((f"GET /repos/{REPO}/pulls?", lambda: github.uninstall(REPO)))
    summary = start(create_session)
    assert summary["state"] == "idle"
    assert not PullRequest.objects.filter(session_id=summary["id"]).exists()
    error = Event.objects.filter(session_id=summary["id"], kind="error").get()
    assert (
        "GitHub refused an installation token for octo-org/widgets (404: Not Found)"
        in (error.payload["message"])
    )
    assert "reinstall" in error.payload["message"]
    assert GitHubLink.objects.get().installation_id is None

    # The next session cannot even fetch the repository, and says why.
    code, later, err = create_session("--prompt", "again", "--agent-command", AGENT, "--inline",
                                      "--as", "engineer")  # fmt: skip
    assert code != 0 and later["state"] == "failed"
    assert "the GitHub App is not installed on octo-org/widgets (404" in later["error"]
    assert github.problems == []
