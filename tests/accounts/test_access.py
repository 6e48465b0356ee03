import pytest
from django.urls import reverse

from accounts import access
from approvals.models import ApprovalRequest
from sessions.models import Session
from snapshots.models import Snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(team):
    return Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix the flaky test", branch="main"
    )


def test_a_member_sees_the_session_page(client, team, session):
    client.force_login(team.reviewer)
    response = client.get(session.get_absolute_url())
    assert response.status_code == 200
    assert b"Fix the flaky test" in response.content


def test_a_non_member_gets_404_on_another_repositorys_session(client, team, session):
    client.force_login(team.outsider)
    response = client.get(session.get_absolute_url())
    assert response.status_code == 404
    assert b"Fix the flaky test" not in response.content


def test_an_anonymous_visitor_is_sent_to_log_in(client, session):
    response = client.get(session.get_absolute_url())
    assert response.status_code == 302
    assert response.url.startswith(reverse("account_login"))


def test_lists_show_only_member_repositories(client, team, session):
    Session.objects.create(
        repository=team.other_repository, creator=team.outsider, title="Secret work", branch="main"
    )
    client.force_login(team.engineer)
    page = client.get(reverse("sessions:list")).content
    assert b"Fix the flaky test" in page
    assert b"Secret work" not in page


def test_snapshots_and_approvals_are_filtered_by_the_same_rule(team, session):
    Snapshot.objects.create(repository=team.repository, branch="main", commit="a" * 40)
    Snapshot.objects.create(repository=team.other_repository, branch="main", commit="b" * 40)
    ApprovalRequest.objects.create(session=session, action="merge_pr", requested_by=team.engineer)

    assert [s.commit[0] for s in access.visible_to(team.engineer, Snapshot.objects.all())] == ["a"]
    assert [s.commit[0] for s in access.visible_to(team.outsider, Snapshot.objects.all())] == ["b"]
    assert access.visible_to(team.reviewer, ApprovalRequest.objects.all()).count() == 1
    assert access.visible_to(team.outsider, ApprovalRequest.objects.all()).count() == 0


def test_an_inactive_member_sees_nothing(team, session):
    team.engineer.is_active = False
    team.engineer.save()
    assert not access.visible_to(team.engineer, Session.objects.all()).exists()


def test_a_model_without_a_repository_path_is_refused(team):
    from django.contrib.auth.models import Group

    with pytest.raises(TypeError, match="no repository_path"):
        access.visible_to(team.admin, Group.objects.all())
