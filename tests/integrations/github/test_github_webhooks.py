"""GitHub's webhooks, replayed from its published payloads: signed deliveries update the
session's pull request once; bad signatures, unknown events and repositories change nothing."""

from datetime import UTC, datetime

import pytest

from approvals.models import AuditEntry
from integrations.github.models import WebhookDelivery
from sessions.models import Event, Prompt, ReviewEvent, Session
from tests.integrations.github.conftest import payload, sign

pytestmark = pytest.mark.django_db


def review(state: str, *, review_id: int, commit: str, at: str) -> dict:
    data = payload("pull_request_review_submitted")
    data["review"].update(id=review_id, state=state, commit_id=commit, submitted_at=at)
    return data


def test_unsigned_and_wrongly_signed_deliveries_are_refused_and_nothing_is_recorded(
    deliver, github_pr
):
    merged = payload("pull_request_closed")
    merged["pull_request"]["merged"] = True
    body_of_another = sign(b'{"action": "opened"}')
    for answer in (
        deliver("pull_request", merged, signature=None),
        deliver("pull_request", merged, secret="not the secret"),
        deliver("pull_request", merged, signature=body_of_another),
        deliver("pull_request", merged, signature="sha1=0123"),
    ):
        assert answer.status_code == 401
        assert "signature" in answer.json()["outcome"]
    assert not WebhookDelivery.objects.exists()
    github_pr.refresh_from_db()
    assert github_pr.state == "open"


def test_nothing_is_accepted_while_no_secret_is_configured(deliver, github_pr, settings):
    settings.GITHUB_WEBHOOK_SECRET = ""
    answer = deliver("ping", {"zen": "Design for failure."})
    assert answer.status_code == 401
    assert "GITHUB_WEBHOOK_SECRET" in answer.json()["outcome"]


def test_a_review_is_recorded_once_even_when_delivered_again(deliver, github_pr, codertocat):
    data = payload("pull_request_review_submitted")
    first = deliver("pull_request_review", data, delivery="d-1")
    assert first.status_code == 200, first.json()
    assert first.json()["outcome"] == "commented review by Codertocat on Codertocat/Hello-World#2"
    again = deliver("pull_request_review", data, delivery="d-1")  # GitHub's "Redeliver"
    assert again.status_code == 200 and again.json()["outcome"].startswith("already handled")
    deliver("pull_request_review", data, delivery="d-2")  # same review, another delivery
    [event] = ReviewEvent.objects.filter(pull_request=github_pr)
    assert (event.kind, event.reviewer, event.reviewer_login) == (
        "commented",
        codertocat,
        "Codertocat",
    )
    assert WebhookDelivery.objects.filter(delivery_id="d-1").count() == 1


def test_reviews_set_the_first_review_time_and_count_rounds(deliver, github_pr, codertocat):
    a, b = "ec26c3e57ca3a959ca5aad62de7213c562f8c821", "5f1c0d4f8e4a1b6c2d3e4f5a6b7c8d9e0f1a2b3c"
    deliver("pull_request_review", review("commented", review_id=1, commit=a,
                                          at="2019-05-15T15:20:38Z"))  # fmt: skip
    deliver("pull_request_review", review("changes_requested", review_id=2, commit=a,
                                          at="2019-05-15T16:00:00Z"))  # fmt: skip
    deliver("pull_request_review", review("APPROVED", review_id=3, commit=b,
                                          at="2019-05-16T09:00:00Z"))  # fmt: skip
    github_pr.refresh_from_db()
    assert github_pr.first_review_at == datetime(2019, 5, 15, 15, 20, 38, tzinfo=UTC)
    assert github_pr.review_rounds == 2  # two head commits were reviewed
    kinds = list(ReviewEvent.objects.filter(pull_request=github_pr).values_list("kind", flat=True))
    assert kinds == ["commented", "changes_requested", "approved"]
    page_lines = Event.objects.filter(session=github_pr.session, kind="review")
    assert [e.payload["review"] for e in page_lines] == kinds
    dismissed = review("dismissed", review_id=4, commit=b, at="2019-05-16T10:00:00Z")
    assert deliver("pull_request_review", dismissed).status_code == 202


def test_a_merge_on_github_merges_the_pr_and_the_session(deliver, github_pr, codertocat):
    data = payload("pull_request_closed")
    data["pull_request"].update(
        merged=True, merged_at="2019-05-15T15:21:18Z", merged_by=data["sender"]
    )
    answer = deliver("pull_request", data)
    assert answer.json()["outcome"] == "Codertocat/Hello-World#2 merged"
    github_pr.refresh_from_db()
    assert github_pr.state == "merged" and github_pr.merged_by == codertocat
    assert github_pr.merge_sha == "c4295bd74fb0f4fda03689c3df3f2803b658fd85"
    assert github_pr.merged_at == datetime(2019, 5, 15, 15, 21, 18, tzinfo=UTC)
    assert Session.objects.get(pk=github_pr.session_id).state == "merged"
    assert AuditEntry.objects.filter(action="pull_request.merged", object_id=github_pr.pk).exists()


def test_a_pr_closed_outside_the_platform_closes_the_session_until_reopened(deliver, github_pr):
    assert deliver("pull_request", payload("pull_request_closed")).status_code == 200
    github_pr.refresh_from_db()
    assert github_pr.state == "closed" and github_pr.merged_at is None
    assert Session.objects.get(pk=github_pr.session_id).state == "closed"

    reopened = payload("pull_request_opened")
    reopened["action"] = "reopened"
    assert deliver("pull_request", reopened).json()["outcome"].endswith("reopened")
    github_pr.refresh_from_db()
    assert github_pr.state == "open"
    assert Session.objects.get(pk=github_pr.session_id).state == "pr_open"


def test_opened_and_synchronize_keep_the_pr_current_and_say_who_pushed(deliver, github_pr):
    assert deliver("pull_request", payload("pull_request_opened")).status_code == 200
    github_pr.refresh_from_db()
    assert github_pr.url == "https://github.com/Codertocat/Hello-World/pull/2"

    ours = deliver("pull_request", payload("pull_request_synchronize"))
    assert "outside" not in ours.json()["outcome"]
    theirs = payload("pull_request_synchronize")
    theirs["pull_request"]["head"]["sha"] = "a" * 40
    assert "pushed outside the session" in deliver("pull_request", theirs).json()["outcome"]
    github_pr.refresh_from_db()
    assert github_pr.head_sha == "a" * 40
    note = Event.objects.filter(session=github_pr.session, kind="pull_request_pushed_outside").get()
    assert "updated on GitHub by Codertocat" in note.payload["message"]


def test_a_comment_mentioning_the_app_queues_a_follow_up_from_the_member(deliver, github_pr, team):
    from allauth.socialaccount.models import SocialAccount

    SocialAccount.objects.create(user=team.admin, provider="github", uid="21031067")
    answer = deliver("issue_comment", payload("issue_comment_created_on_pull_request"))
    assert answer.status_code == 200, answer.json()
    assert answer.json()["outcome"].startswith("follow-up prompt 2 queued from @Codertocat")
    prompt = Prompt.objects.filter(session=github_pr.session).order_by("-order").first()
    assert prompt.order == 2 and prompt.author == team.admin
    assert prompt.text.startswith("please also fix the spelling of 'commit' in CONTRIBUTING.md")
    assert "Codertocat/Hello-World#2" in prompt.text


def test_a_comment_replayed_under_another_delivery_id_queues_nothing_more(deliver, github_pr, team):
    from allauth.socialaccount.models import SocialAccount

    SocialAccount.objects.create(user=team.admin, provider="github", uid="21031067")
    comment = payload("issue_comment_created_on_pull_request")
    assert deliver("issue_comment", comment, delivery="c-1").status_code == 200
    replayed = deliver("issue_comment", comment, delivery="c-2")  # same signed body
    assert replayed.status_code == 200
    assert replayed.json()["outcome"] == (
        f"comment {comment['comment']['id']} on Codertocat/Hello-World#2 already queued a prompt"
    )
    assert github_pr.session.prompts.count() == 2  # the first prompt and one follow-up


def test_a_comment_from_someone_who_may_not_prompt_is_shown_not_queued(
    deliver, github_pr, codertocat
):
    from allauth.socialaccount.models import SocialAccount

    SocialAccount.objects.all().delete()
    answer = deliver("issue_comment", payload("issue_comment_created_on_pull_request"))
    assert answer.status_code == 200 and "not queued" in answer.json()["outcome"]
    SocialAccount.objects.create(user=codertocat, provider="github", uid="21031067")
    deliver("issue_comment", payload("issue_comment_created_on_pull_request"))  # a reviewer
    assert github_pr.session.prompts.count() == 1
    errors = Event.objects.filter(session=github_pr.session, kind="error")
    assert [("no account here" in e.payload["message"], "may not prompt" in e.payload["message"])
            for e in errors] == [(True, False), (False, True)]  # fmt: skip


def test_comments_that_do_not_ask_the_app_are_ignored(deliver, github_pr, codertocat):
    plain = payload("issue_comment_created_on_pull_request")
    plain["comment"]["body"] = "Looks good to me."
    on_issue = payload("issue_comment_created_on_pull_request")
    del on_issue["issue"]["pull_request"]
    for data in (plain, on_issue):
        assert deliver("issue_comment", data).status_code == 202
    assert github_pr.session.prompts.count() == 1
    assert not WebhookDelivery.objects.exists()


def test_a_revert_pushed_to_the_base_branch_is_an_escaped_defect(deliver, github_pr):
    from sessions.pulls import mark_merged

    mark_merged(github_pr, merge_sha="c4295bd74fb0f4fda03689c3df3f2803b658fd85")
    answer = deliver("push", payload("push_revert_to_master"))
    assert answer.json()["outcome"] == "push to master reverts #2"
    github_pr.refresh_from_db()
    assert github_pr.reverted_at == datetime(2019, 5, 16, 16, 12, 40, tzinfo=UTC)
    assert github_pr.revert_sha == "d6fde92930d4715a2b49857d24b940956b26d2d3"
    # Delivered again, or a later push mentioning it: still one escaped defect.
    assert deliver("push", payload("push_revert_to_master")).status_code == 200
    assert AuditEntry.objects.filter(action="pull_request.reverted").count() == 1

    tag = deliver("push", payload("push_tag_deleted"))
    assert tag.status_code == 202 and "not to a branch" in tag.json()["outcome"]


def test_unknown_events_and_repositories_are_answered_202_and_not_recorded(deliver, github_pr):
    answer = deliver("star", {"action": "created", "repository": {"full_name": "a/b"}})
    assert answer.status_code == 202 and answer.json()["outcome"].startswith("ignored")
    elsewhere = payload("pull_request_closed")
    elsewhere["repository"]["full_name"] = "Octocat/Spoon-Knife"
    answer = deliver("pull_request", elsewhere)
    assert answer.status_code == 202
    assert "no repository here is linked to Octocat/Spoon-Knife" in answer.json()["outcome"]
    foreign_pr = payload("pull_request_closed")
    foreign_pr["pull_request"]["number"] = foreign_pr["number"] = 77
    answer = deliver("pull_request", foreign_pr)
    assert answer.status_code == 202 and "not opened by a session" in answer.json()["outcome"]
    assert deliver("installation", payload("installation_created")).status_code == 202
    assert deliver("ping", {"zen": "Keep it logically awesome."}).json() == {"outcome": "pong"}
    assert not WebhookDelivery.objects.exists()
    github_pr.refresh_from_db()
    assert github_pr.state == "open"


def test_a_broken_body_or_missing_headers_are_bad_requests(client, settings):
    settings.GITHUB_WEBHOOK_SECRET = "s"
    body = b"not json"
    answer = client.post("/webhooks/github/", data=body, content_type="application/json",
                         headers={"X-GitHub-Event": "push", "X-GitHub-Delivery": "x",
                                  "X-Hub-Signature-256": sign(body, "s")})  # fmt: skip
    assert answer.status_code == 400
    answer = client.post("/webhooks/github/", data=b"{}", content_type="application/json",
                         headers={"X-Hub-Signature-256": sign(b"{}", "s")})  # fmt: skip
    assert answer.status_code == 400
    assert client.get("/webhooks/github/").status_code == 405


def test_an_uninstalled_app_is_forgotten_by_its_repositories(deliver, github_pr):
    from integrations.github.models import GitHubLink

    gone = payload("installation_created")
    gone["action"] = "deleted"
    gone["installation"]["id"] = 1
    assert deliver("installation", gone).status_code == 200
    assert GitHubLink.objects.get().installation_id is None
