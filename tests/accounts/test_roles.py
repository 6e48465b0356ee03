import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from accounts import access, roles

pytestmark = pytest.mark.django_db

EXPECTED = {
    # permission: roles that hold it on their repository
    roles.START_SESSION: {"engineer", "admin"},
    roles.PROMPT_SESSION: {"engineer", "admin"},
    roles.STOP_SESSION: {"engineer", "admin"},
    roles.REFRESH_SNAPSHOT: {"engineer", "admin"},
    roles.DECIDE_APPROVAL: {"reviewer", "admin"},
    roles.VIEW_METRICS: {"manager", "admin"},
    roles.MANAGE_REPOSITORY: {"admin"},
}


def test_each_role_is_a_group_holding_its_permissions():
    for role, permissions in roles.ROLE_PERMISSIONS.items():
        group = Group.objects.get(name=role)
        held = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}
        assert held == set(permissions)


@pytest.mark.parametrize("permission", sorted(EXPECTED))
def test_the_permission_matrix(team, permission):
    for role in ["engineer", "reviewer", "manager", "admin"]:
        user = getattr(team, role)
        assert access.has_repo_permission(user, team.repository, permission) == (
            role in EXPECTED[permission]
        ), f"{role} / {permission}"
    # An admin elsewhere holds nothing here.
    assert not access.has_repo_permission(team.outsider, team.repository, permission)


def test_a_permission_granted_to_a_group_takes_effect_without_code(team):
    from django.contrib.auth.models import Permission

    assert not access.has_repo_permission(team.reviewer, team.repository, roles.VIEW_METRICS)
    Group.objects.get(name="reviewer").permissions.add(
        Permission.objects.get(codename="view_metrics")
    )
    assert access.has_repo_permission(team.reviewer, team.repository, roles.VIEW_METRICS)


def test_require_repo_permission_says_what_to_do(team):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied, match="Your role on widgets does not allow this"):
        access.require_repo_permission(team.manager, team.repository, roles.START_SESSION)


def test_metrics_page_lists_only_repositories_the_role_allows(client, team):
    client.force_login(team.manager)
    assert b"widgets" in client.get(reverse("metrics")).content
    client.force_login(team.engineer)
    page = client.get(reverse("metrics")).content
    assert b"widgets" not in page
    assert b"manager or admin role" in page
