"""GitHub's CI webhooks on a session's pull request, by policy: `auto` queues a fix turn, `ask`
offers it on the session page (a member's button queues it), `off` records only; a check of a
commit that is not the head, our own `Inspect / verify` check and a repository not linked queue
nothing, and say why."""

import pytest
from rest_framework.test import APIClient

from api.tokens import token_create
from approvals.models import AuditEntry
from integrations.github.models import WebhookDelivery
from sessions.models import CheckResult, CIFix, Event, Prompt
from tests.integrations.github.conftest import payload, status_event

pytestmark = pytest.mark.django_db

OTHER_SHA = "5f1c0d4f8e4a1b6c2d3e4f5a6b7c8d9e0f1a2b3c"


def prompts(pr) -> list[Prompt]:
    return list(Prompt.objects.filter(session=pr.session).order_by("order"))


def test_a_failed_status_on_the_head_queues_one_fix_turn(deliver, github_pr):
    answer = deliver("status", status_event(github_pr))
    assert answer.status_code == 200
    assert answer.json()["outcome"].endswith("failed: fix turn queued (prompt 2, attempt 1)")
    [_, fix] = prompts(github_pr)
    assert fix.origin == "ci_fix" and fix.author == github_pr.author
    assert fix.text.startswith("CI failed: ci/build: 2 tests failed\n")
    assert "https://ci.example.com/builds/ec26c3e" in fix.text
    # The same delivery again, or the same status under a new delivery id: nothing more.
    assert (
        deliver("status", status_event(github_pr))
        .json()["outcome"]
        .endswith("already recorded (failure)")
    )
    # Another failing check on the same commit: the fix already asked is the one.
    other = deliver("status", status_event(github_pr, context="ci/lint"))
    assert "ci/build already decided a CI fix for this commit (queued)" in other.json()["outcome"]
    assert len(prompts(github_pr)) == 2
    assert CIFix.objects.get().prompt == fix
    # The REST API says who asked.
    api = APIClient()
    token = token_create(user=github_pr.author, name="t", expires_in_days=7)[1]
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    listed = api.get(f"/api/sessions/{github_pr.session_id}/").json()["prompts"]
    assert [(p["order"], p["origin"]) for p in listed] == [(1, ""), (2, "ci_fix")]


def test_ask_offers_the_fix_and_a_member_who_may_prompt_queues_it(deliver, github_pr, client, team):
    team.repository.ci_fix_policy = "ask"
    team.repository.save()
    answer = deliver("status", status_event(github_pr))
    assert answer.json()["outcome"].endswith("a fix turn is offered on the session page")
    assert len(prompts(github_pr)) == 1
    [offer] = Event.objects.filter(session=github_pr.session, kind="ci_fix_offered")
    url = f"/sessions/{github_pr.session_id}/ci-fixes/{offer.payload['fix']}/queue/"
    client.force_login(team.engineer)
    page = client.get(f"/sessions/{github_pr.session_id}/").content.decode()
    assert f'hx-post="{url}"' in page and "Queue the fix turn" in page

    client.force_login(team.outsider)
    assert client.post(url, headers={"HX-Request": "true"}).status_code == 404
    client.force_login(team.manager)  # sees the session, may not prompt it
    refused = client.post(url, headers={"HX-Request": "true"})
    assert "does not allow this" in refused.content.decode()
    assert len(prompts(github_pr)) == 1

    client.force_login(team.engineer)
    queued = client.post(url, headers={"HX-Request": "true"})
    assert "fix turn queued (prompt 2, attempt 1)" in queued.content.decode()
    [_, fix] = prompts(github_pr)
    assert (fix.origin, fix.author) == ("ci_fix", team.engineer)
    again = client.post(url, headers={"HX-Request": "true"})
    assert "already fix turn queued" in again.content.decode()
    assert len(prompts(github_pr)) == 2


def test_off_records_the_result_only(deliver, github_pr, team):
    team.repository.ci_fix_policy = "off"
    team.repository.save()
    answer = deliver("status", status_event(github_pr))
    assert "CI fixes are off for widgets: recorded only" in answer.json()["outcome"]
    assert len(prompts(github_pr)) == 1
    assert CheckResult.objects.get().conclusion == "failure"
    [event] = Event.objects.filter(session=github_pr.session, kind="check_result")
    assert event.payload["on_head"] is True and "recorded only" in event.payload["message"]


def test_a_check_of_another_commit_is_recorded_with_the_reason_and_queues_nothing(
    deliver, github_pr
):
    answer = deliver("status", status_event(github_pr, sha=OTHER_SHA))
    assert answer.status_code == 200
    assert (
        "not the pull request's head (ec26c3e57ca3): no fix is queued" in (answer.json()["outcome"])
    )
    assert len(prompts(github_pr)) == 1 and not CIFix.objects.exists()
    assert WebhookDelivery.objects.get(event="status").outcome == answer.json()["outcome"]
    pending = deliver("status", status_event(github_pr, state="pending", context="ci/slow"))
    assert pending.json()["outcome"].endswith("is in_progress")
    passed = deliver("status", status_event(github_pr, state="success", context="ci/lint"))
    assert passed.json()["outcome"].endswith(": success")
    assert len(prompts(github_pr)) == 1


def test_our_own_check_and_unlinked_repositories_are_ignored(deliver, github_pr):
    run = {
        "id": 4, "name": "Inspect / verify", "head_sha": github_pr.head_sha,
        "status": "completed", "conclusion": "failure",
        "output": {"title": "Verification failed", "summary": "", "text": ""},
        "app": {"id": 4242, "slug": "inspect-web"}, "pull_requests": [{"number": 2}],
        "check_suite": {"id": 5, "head_branch": github_pr.branch},
    }  # fmt: skip
    data = {"action": "completed", "check_run": run, **_envelope()}
    ignored = deliver("check_run", data)
    assert ignored.status_code == 202
    assert ignored.json()["outcome"] == "ignored: Inspect / verify is this App's own check"

    elsewhere = status_event(github_pr)
    elsewhere["repository"] = {**elsewhere["repository"], "full_name": "someone/else"}
    answer = deliver("status", elsewhere)
    assert answer.status_code == 202
    assert "no repository here is linked to someone/else" in answer.json()["outcome"]
    assert len(prompts(github_pr)) == 1 and not CheckResult.objects.exists()
    assert not WebhookDelivery.objects.exists()


def _envelope() -> dict:
    data = payload("pull_request_opened")
    return {"repository": data["repository"], "sender": data["sender"],
            "installation": {"id": 1}}  # fmt: skip


def test_the_policy_is_set_per_repository_from_the_command_line(inspect_cli, team):
    code, out, err = inspect_cli("github", "ci-fix", "widgets")
    assert (code, out.strip()) == (
        0,
        "widgets: CI fixes auto, at most 2 fix turns per pull request",
    )
    code, out, err = inspect_cli(
        "github", "ci-fix", "widgets", "--policy", "ask", "--attempts", "3"
    )
    assert code == 0 and "CI fixes ask, at most 3 fix turns" in out
    team.repository.refresh_from_db()
    assert (team.repository.ci_fix_policy, team.repository.ci_fix_attempts) == ("ask", 3)
    code, out, err = inspect_cli("github", "ci-fix", "widgets", "--attempts", "99")
    assert code == 1 and "attempts must be between 0 and 20, not 99" in err
    entry = AuditEntry.objects.filter(action="repository.ci_fix_policy").get()
    assert entry.data["after"] == {"policy": "ask", "attempts": 3}
