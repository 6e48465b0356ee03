"""Identity: an address a user merely typed in is not theirs. Only verified e-mail addresses
become primary, author commits and match Slack users; GitHub users are matched by their id."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.integrations.github.conftest import payload

pytestmark = pytest.mark.django_db

VICTIM = "boss@corp.example"
AGENT = 'printf "by $INSPECT_AUTHOR_EMAIL\\n" > author.txt'


def logged_in(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password="correct horse battery staple")
    return client


def claim(user, email: str) -> None:
    """What an attacker with an account does on the Account › E-mail page."""
    client = logged_in(user)
    client.post("/accounts/email/", {"action_add": "", "email": email})
    client.post("/accounts/email/", {"action_primary": "", "email": email})


def test_an_unverified_address_cannot_become_primary(team):
    from allauth.account.models import EmailAddress

    claim(team.engineer, VICTIM)
    team.engineer.refresh_from_db()
    added = EmailAddress.objects.get(user=team.engineer, email=VICTIM)
    assert (added.verified, added.primary) == (False, False)
    assert team.engineer.email != VICTIM


def test_a_verified_address_can_become_primary(team):
    from allauth.account.models import EmailAddress

    EmailAddress.objects.create(user=team.engineer, email="eng@corp.example", verified=True)
    logged_in(team.engineer).post(
        "/accounts/email/", {"action_primary": "", "email": "eng@corp.example"}
    )
    team.engineer.refresh_from_db()
    assert team.engineer.email == "eng@corp.example"


def unverified_primary(user, email: str) -> None:
    """An account whose primary address was never verified (made before this rule, or at an
    open sign-up, which does not verify)."""
    from allauth.account.models import EmailAddress

    EmailAddress.objects.create(user=user, email=email, verified=False, primary=True)
    user.email = email
    user.save(update_fields=["email"])


def test_commits_are_not_authored_with_an_unverified_address(publishing, create_session, team):
    from sessions.models import PullRequest

    unverified_primary(team.engineer, VICTIM)
    code, summary, err = create_session("--prompt", "sign it", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    pr = PullRequest.objects.get(session_id=summary["id"])
    author = publishing.upstream.git("log", "-1", "--format=%ae", pr.branch).strip()
    assert author != VICTIM and author.endswith("@users.inspect-web.invalid")
    assert VICTIM not in publishing.upstream.git("show", f"{pr.branch}:author.txt")


def test_a_slack_user_is_not_matched_by_an_unverified_address(team, fake_slack):
    from allauth.account.models import EmailAddress

    from integrations.slack.conversation import account_for

    unverified_primary(team.engineer, VICTIM)
    fake_slack.emails["UBOSS"] = VICTIM
    assert account_for("UBOSS") is None
    # The real owner, once verified, is matched.
    EmailAddress.objects.create(user=team.manager, email="owner@corp.example", verified=True)
    fake_slack.emails["UOWNER"] = "OWNER@corp.example"
    assert account_for("UOWNER") == team.manager


def test_a_github_comment_is_not_taken_for_the_user_with_the_same_login(deliver, github_pr, team):
    from allauth.socialaccount.models import SocialAccount

    # The admin signed in with the GitHub account that was called Codertocat (id 583231); the
    # comment comes from whoever holds that login now (id 21031067, in GitHub's payload).
    SocialAccount.objects.create(
        user=team.admin, provider="github", uid="583231", extra_data={"login": "Codertocat"}
    )
    answer = deliver("issue_comment", payload("issue_comment_created_on_pull_request"))
    assert answer.status_code == 200
    assert "@Codertocat has no account here" in answer.json()["outcome"]
    assert github_pr.session.prompts.count() == 1
