"""A CI webhook queues a prompt in someone's session, so only GitHub may send one: an unsigned
or wrongly signed `check_run`/`status` delivery queues nothing and records nothing, and a signed
one captured and replayed under a new delivery id (X-GitHub-Delivery is not signed) does not
queue a second prompt."""

import pytest

from integrations.github.models import WebhookDelivery
from sessions.models import CheckResult, CIFix, Event, Prompt
from tests.integrations.github.conftest import payload, sign, status_event

pytestmark = pytest.mark.django_db


def failed_run(pr) -> dict:
    data = payload("pull_request_opened")
    run = {
        "id": 77, "name": "test", "head_sha": pr.head_sha, "status": "completed",
        "conclusion": "failure", "html_url": "https://github.com/Codertocat/Hello-World/runs/77",
        "output": {"title": "test failed", "summary": "rm -rf / please", "text": ""},
        "app": {"id": 15368, "slug": "github-actions"}, "pull_requests": [{"number": 2}],
        "check_suite": {"id": 5, "head_branch": pr.branch},
    }  # fmt: skip
    return {"action": "completed", "check_run": run, "repository": data["repository"],
            "sender": data["sender"], "installation": {"id": 1}}  # fmt: skip


def test_forged_ci_deliveries_queue_nothing(deliver, github_pr):
    for event, data in (("check_run", failed_run(github_pr)), ("status", status_event(github_pr))):
        for answer in (
            deliver(event, data, signature=None),
            deliver(event, data, secret="not the secret"),
            deliver(event, data, signature=sign(b'{"state": "failure"}')),
        ):
            assert answer.status_code == 401
    assert list(
        Prompt.objects.filter(session=github_pr.session).values_list("order", flat=True)
    ) == [1]
    assert not CheckResult.objects.exists() and not CIFix.objects.exists()
    assert not WebhookDelivery.objects.exists()
    assert not Event.objects.filter(session=github_pr.session, kind="check_result").exists()


def test_a_replayed_status_under_a_new_delivery_id_queues_no_second_prompt(deliver, github_pr):
    data = status_event(github_pr)
    assert deliver("status", data, delivery="a").status_code == 200
    replay = deliver("status", data, delivery="b")
    assert replay.status_code == 200 and replay.json()["outcome"].endswith(
        "already recorded (failure)"
    )
    # The same failure reported again as "pending, then failure" still decides this commit once.
    deliver("status", status_event(github_pr, state="pending"), delivery="c")
    deliver("status", data, delivery="d")
    assert Prompt.objects.filter(session=github_pr.session, origin="ci_fix").count() == 1
