"""Every URL that takes an id answers 404 to a logged-in non-member (invariant 6)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals import audit
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
    }


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
    ]


def test_a_non_member_gets_404_for_every_object(objects, team, client_for):
    client = client_for(team.outsider)
    for method, url in _urls(objects):
        response = getattr(client, method)(url, {"decision": "approve", "text": "hi"})
        assert response.status_code == 404, (method, url, response.status_code)
    objects["approval"].refresh_from_db()
    assert objects["approval"].state == "pending"


def test_a_member_reaches_the_same_pages(objects, team, client_for):
    client = client_for(team.reviewer)
    for method, url in _urls(objects):
        if method == "get":
            assert client.get(url).status_code != 404, url


def test_the_audit_page_filtered_by_another_repositorys_session_shows_nothing(
    objects, team, client_for
):
    page = client_for(team.outsider).get(
        reverse("approvals:audit"), {"session": objects["session"].pk}
    )
    assert "test.mine" not in page.content.decode()
