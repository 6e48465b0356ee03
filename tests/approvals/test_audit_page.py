"""The audit page: filtered by session, user, repository and action; members see their own."""

from __future__ import annotations

from django.urls import reverse

from approvals import audit


def test_members_see_their_repositories_entries_filtered(team, agent_session, client_for):
    audit.record("test.mine", actor=team.reviewer, session=agent_session, data={})
    audit.record("test.theirs", actor=team.outsider, repository=team.other_repository, data={})
    client = client_for(team.engineer)
    page = client.get(reverse("approvals:audit")).content.decode()
    assert "test.mine" in page and "test.theirs" not in page
    page = client.get(reverse("approvals:audit"), {"session": agent_session.pk}).content.decode()
    assert "<code>test.mine</code>" in page and "<code>membership.add</code>" not in page
    page = client.get(reverse("approvals:audit"), {"user": "nobody"}).content.decode()
    assert "<code>test.mine</code>" not in page
    page = client.get(
        reverse("approvals:audit"), {"action": "test.mine", "repository": "widgets"}
    ).content.decode()
    assert "test.mine" in page


def test_a_site_admin_sees_every_entry(team, client_for):
    audit.record("test.theirs", actor=team.outsider, repository=team.other_repository, data={})
    page = client_for(team.admin).get(reverse("approvals:audit")).content.decode()
    assert "test.theirs" in page


def test_an_entry_page_shows_its_hashes(team, agent_session, client_for):
    entry = audit.record("test.mine", actor=team.reviewer, session=agent_session, data={"k": 1})
    page = client_for(team.reviewer).get(reverse("approvals:audit-entry", args=[entry.pk]))
    assert entry.hash in page.content.decode()
