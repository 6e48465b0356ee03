"""Every URL that takes an id answers 404 to a logged-in non-member (invariant 6)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals import audit
from automations.services import automation_create
from snapshots.models import Snapshot


@pytest.fixture
def objects(team, agent_session, agent_request):
    snapshot = Snapshot.objects.create(repository=team.repository, branch="main", log="secret log")
    entry = audit.record("test.mine", actor=team.reviewer, session=agent_session, data={})
    return {
        "session": agent_session,
        "approval": agent_request,
        "snapshot": snapshot,
        "entry": entry,
        "automation": automation_create(
            repository=team.repository, creator=team.engineer, name="nightly", prompt="tidy",
            cron="0 3 * * *",
        ),
    }  # fmt: skip


def _urls(o) -> list[tuple[str, str]]:
    return [
        ("get", reverse("sessions:detail", args=[o["session"].pk])),
        ("get", reverse("sessions:older", args=[o["session"].pk])),
        ("post", reverse("sessions:prompt", args=[o["session"].pk])),
        ("post", reverse("sessions:stop", args=[o["session"].pk])),
        ("get", reverse("snapshots:detail", args=[o["snapshot"].pk])),
        ("get", reverse("approvals:detail", args=[o["approval"].pk])),
        ("post", reverse("approvals:decide", args=[o["approval"].pk])),
        ("get", reverse("approvals:audit-entry", args=[o["entry"].pk])),
        ("post", reverse("automations:toggle", args=[o["automation"].pk])),
    ]


def _sandbox_urls(o) -> list[str]:
    """Screenshots and the live preview: 404 for a member too when nothing is there, so they
    are only checked for the non-member."""
    pk = o["session"].pk
    return [
        reverse("sandbox:screenshot", args=[pk, "0" * 16]),
        reverse("sandbox:preview-root", args=[pk]),
        reverse("sandbox:preview", args=[pk, "index.html"]),
    ]


def _api_urls(o) -> list[tuple[str, str]]:
    pk = o["session"].pk
    return [
        ("get", f"/api/sessions/{pk}/"),
        ("get", f"/api/sessions/{pk}/events/"),
        ("get", f"/api/sessions/{pk}/events/stream/"),
        ("get", f"/api/sessions/{pk}/diff/"),
        ("post", f"/api/sessions/{pk}/prompts/"),
        ("post", f"/api/sessions/{pk}/stop/"),
        ("post", f"/api/approvals/{o['approval'].pk}/decide/"),
        ("post", "/api/repositories/widgets/refresh/"),
    ]


def test_a_non_member_gets_404_for_every_object(objects, team, client_for):
    client = client_for(team.outsider)
    for method, url in _urls(objects):
        response = getattr(client, method)(url, {"decision": "approve", "text": "hi"})
        assert response.status_code == 404, (method, url, response.status_code)
    for url in _sandbox_urls(objects):
        assert client.get(url).status_code == 404, url
    objects["approval"].refresh_from_db()
    assert objects["approval"].state == "pending"


def test_a_non_member_gets_404_from_every_api_url_with_an_id(objects, team, api):
    client = api(team.outsider)
    for method, url in _api_urls(objects):
        body = {"text": "hi", "approve": True, "decision": "approve"}
        response = getattr(client, method)(url, body, format="json")
        assert response.status_code == 404, (method, url, response.status_code)
    objects["approval"].refresh_from_db()
    assert objects["approval"].state == "pending"
    assert objects["session"].prompts.count() == 1


def test_a_member_reaches_the_same_pages(objects, team, client_for, api):
    client = client_for(team.reviewer)
    for method, url in _urls(objects):
        if method == "get":
            assert client.get(url).status_code != 404, url
    # …and through the API the member gets past the 404 (their token is good).
    member = api(team.reviewer)
    for method, url in _api_urls(objects):
        if method == "get" and not url.endswith("/stream/"):
            assert member.get(url).status_code == 200, url


def test_the_audit_page_filtered_by_another_repositorys_session_shows_nothing(
    objects, team, client_for
):
    page = client_for(team.outsider).get(
        reverse("approvals:audit"), {"session": objects["session"].pk}
    )
    assert "test.mine" not in page.content.decode()
