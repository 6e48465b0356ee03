"""A repository's review agent policy on its "Review agent" settings tab: its admins set it
(audited), other members may not, non-members do not find the page, a bad value is refused."""

import pytest

from approvals.models import AuditEntry

pytestmark = pytest.mark.django_db
PAGE = "/settings/repositories/widgets/review-agent/"


def test_an_admin_sets_the_policy_and_others_cannot(client, team):
    client.force_login(team.admin)
    page = client.get(PAGE).content.decode()
    assert 'value="request" checked' in page
    saved = client.post(PAGE, {"policy": "every"})
    assert saved.status_code == 302 and saved["Location"] == f"{PAGE}?done=1"
    team.repository.refresh_from_db()
    assert team.repository.review_agent == "every"
    entry = AuditEntry.objects.get(action="repository.review_agent")
    assert entry.actor == team.admin and entry.data == {"before": "request", "after": "every"}

    refused = client.post(PAGE, {"policy": "sometimes"})
    assert refused.status_code == 400
    assert "sometimes&#x27; is not a review agent policy" in refused.content.decode()

    client.force_login(team.engineer)
    assert client.post(PAGE, {"policy": "off"}).status_code == 403
    client.force_login(team.outsider)
    assert client.get(PAGE).status_code == 404
    team.repository.refresh_from_db()
    assert team.repository.review_agent == "every"
