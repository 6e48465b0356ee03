"""A repository's CI-fix policy on its "CI fixes" settings tab: its admins set it (audited), other
members may not, non-members do not find the page, and a bad number is refused with the reason."""

import pytest

from approvals.models import AuditEntry

pytestmark = pytest.mark.django_db
PAGE = "/settings/repositories/widgets/ci/"


def test_an_admin_sets_the_policy_and_others_cannot(client, team):
    client.force_login(team.admin)
    page = client.get(PAGE).content.decode()
    assert 'value="auto" checked' in page and 'value="2"' in page
    saved = client.post(PAGE, {"policy": "ask", "attempts": "3"})
    assert saved.status_code == 302 and saved["Location"] == f"{PAGE}?done=1"
    team.repository.refresh_from_db()
    assert (team.repository.ci_fix_policy, team.repository.ci_fix_attempts) == ("ask", 3)
    entry = AuditEntry.objects.get(action="repository.ci_fix_policy")
    assert entry.actor == team.admin and entry.data["after"] == {"policy": "ask", "attempts": 3}

    refused = client.post(PAGE, {"policy": "sometimes", "attempts": "3"})
    assert refused.status_code == 400
    assert "sometimes&#x27; is not a CI-fix policy" in refused.content.decode()
    assert client.post(PAGE, {"policy": "off", "attempts": "many"}).status_code == 400
    team.repository.refresh_from_db()
    assert (team.repository.ci_fix_policy, team.repository.ci_fix_attempts) == ("ask", 3)

    client.force_login(team.engineer)
    assert client.post(PAGE, {"policy": "off", "attempts": "0"}).status_code == 403
    client.force_login(team.outsider)
    assert client.get(PAGE).status_code == 404
    team.repository.refresh_from_db()
    assert team.repository.ci_fix_policy == "ask"
