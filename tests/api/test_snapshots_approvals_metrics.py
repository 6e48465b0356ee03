"""Snapshots, approvals and metrics through the API."""

import pytest

from approvals.gate import request_approval
from sessions.models import Event, Session
from snapshots.models import Snapshot

pytestmark = pytest.mark.django_db


def test_snapshots_are_listed_per_member_and_a_refresh_is_queued(
    team, api, django_capture_on_commit_callbacks
):
    Snapshot.objects.create(repository=team.repository, branch="main", state="ready")
    Snapshot.objects.create(repository=team.other_repository, branch="main", state="ready")
    listed = api(team.engineer).get("/api/snapshots/").json()
    assert [s["repository"] for s in listed] == ["widgets"]

    with django_capture_on_commit_callbacks() as callbacks:
        response = api(team.engineer).post("/api/repositories/widgets/refresh/")
    assert response.status_code == 202 and response.json() == {
        "repository": "widgets",
        "queued": True,
    }
    assert len(callbacks) == 1
    assert api(team.reviewer).post("/api/repositories/widgets/refresh/").status_code == 403
    assert api(team.outsider).post("/api/repositories/widgets/refresh/").status_code == 404


def test_a_reviewer_decides_a_pending_approval_once(team, api):
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    approval = request_approval(
        session=session, action="merge", payload={}, requested_by=team.engineer
    )
    assert (
        api(team.engineer)
        .post(f"/api/approvals/{approval.pk}/decide/", {"decision": "approve"})
        .status_code
        == 403
    )
    assert (
        api(team.outsider)
        .post(f"/api/approvals/{approval.pk}/decide/", {"decision": "approve"})
        .status_code
        == 404
    )
    pending = api(team.reviewer).get("/api/approvals/", {"state": "pending"}).json()
    assert [a["id"] for a in pending] == [approval.pk]

    response = api(team.reviewer).post(
        f"/api/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": "looks right"}
    )
    assert response.status_code == 200
    assert response.json()["state"] == "approved" and response.json()["decided_by"] == "reviewer"
    told = Event.objects.filter(session=session, kind="approval").order_by("seq")
    assert [e.payload.get("state") for e in told] == ["pending", "approved"]  # viewers told
    again = api(team.admin).post(f"/api/approvals/{approval.pk}/decide/", {"decision": "reject"})
    assert again.status_code == 400 and "already approved" in again.json()["detail"]


def test_the_requester_cannot_approve_their_own_request(team, api):
    session = Session.objects.create(repository=team.repository, creator=team.admin, title="t")
    approval = request_approval(
        session=session, action="merge", payload={}, requested_by=team.admin
    )
    response = api(team.admin).post(
        f"/api/approvals/{approval.pk}/decide/", {"decision": "approve"}
    )
    assert response.status_code == 403 and "another reviewer" in response.json()["detail"]


def test_metrics_summary_covers_repositories_whose_metrics_you_may_see(team, api):
    Session.objects.create(
        repository=team.repository, creator=team.engineer, title="t", state="idle"
    )
    Session.objects.create(
        repository=team.repository, creator=team.engineer, title="u", state="failed"
    )
    summary = api(team.manager).get("/api/metrics/summary/").json()
    assert summary["repositories"] == [
        {"repository": "widgets", "sessions": 2, "sessions_last_7_days": 2, "prompts": 0,
         "by_state": {"idle": 1, "failed": 1}}
    ]  # fmt: skip
    assert api(team.engineer).get("/api/metrics/summary/").json() == {"repositories": []}
