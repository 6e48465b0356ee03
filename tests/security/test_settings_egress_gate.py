"""Attack: an admin widens a repository's egress from the settings area and approves it
themselves. The settings pages use the same action as `inspect recipe set`: the wider egress is
held back as a `widen_egress` request, and the admin who asked cannot decide it (four eyes);
another reviewer's approval carries it out."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals import gate
from approvals.models import ApprovalRequest

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def with_override(team):
    team.repository.recipe_override = 'setup = ["make"]\n'
    team.repository.save()
    return team


@pytest.mark.parametrize("page", ["controls", "recipe"])
def test_an_admin_cannot_widen_egress_alone(with_override, page):
    team = with_override
    admin = _as(team.admin)
    if page == "controls":
        admin.post(
            "/settings/repositories/widgets/controls/egress/",
            {"mode": "allowlist", "domains": "exfil.example.org"},
        )
    else:
        admin.post(
            "/settings/repositories/widgets/recipe/",
            {"text": 'egress = { mode = "allowlist", domains = ["exfil.example.org"] }\n'},
        )
    team.repository.refresh_from_db()
    assert team.repository.approved_network.mode == "none", "widened without approval"
    assert "exfil" not in team.repository.recipe_override
    pending = ApprovalRequest.objects.get(action="widen_egress")
    assert pending.state == "pending" and pending.requested_by == team.admin

    # Their own approval, through the approval page: refused, nothing changes.
    admin.post(f"/approvals/{pending.pk}/decide/", {"decision": "approve"})
    pending.refresh_from_db()
    assert pending.state == "pending" and pending.decided_by is None
    team.repository.refresh_from_db()
    assert team.repository.approved_network.mode == "none"

    # Another reviewer's approval carries it out (the worker's step, run here directly).
    _as(team.reviewer).post(f"/approvals/{pending.pk}/decide/", {"decision": "approve"})
    pending.refresh_from_db()
    assert pending.state == "approved" and pending.decided_by == team.reviewer
    gate.execute_approval(pending.pk)
    team.repository.refresh_from_db()
    assert team.repository.approved_network.domains == ("exfil.example.org",)
    assert "exfil.example.org" in team.repository.recipe_override
