"""Repository membership: the one place that decides what a user may see and do.

Every queryset of sessions, snapshots or approvals shown to a user goes through `visible_to`;
every action goes through `has_repo_permission` / `require_repo_permission`.
"""

from __future__ import annotations

from typing import TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404

from accounts.models import Membership

M = TypeVar("M", bound=models.Model)
AnyUser = AbstractBaseUser | AnonymousUser


def _repositories() -> models.QuerySet:
    # The model a membership points at: repositories belong to snapshots/, a layer above, so
    # accounts reaches them through its own foreign key instead of importing them.
    return Membership.repository.field.related_model.objects.all()


def _roles_with(permission: str) -> models.QuerySet:
    app_label, codename = permission.split(".", 1)
    return Group.objects.filter(
        permissions__content_type__app_label=app_label, permissions__codename=codename
    ).values("name")


def repositories_for(user: AnyUser, *, permission: str | None = None) -> models.QuerySet:
    """Repositories `user` is a member of (with `permission` through their role, if given)."""
    if not user.is_authenticated or not user.is_active:
        return _repositories().none()
    memberships = Membership.objects.filter(user=user)
    if permission:
        memberships = memberships.filter(role__in=_roles_with(permission))
    return _repositories().filter(pk__in=memberships.values("repository_id"))


def visible_to(user: AnyUser, queryset: models.QuerySet[M]) -> models.QuerySet[M]:
    """`queryset` narrowed to objects of repositories `user` is a member of.

    The model names its path to the repository in `repository_path` ("repository",
    "session__repository", ...); a model without one is refused rather than shown unfiltered.
    """
    path = getattr(queryset.model, "repository_path", None)
    if path is None:
        raise TypeError(f"{queryset.model.__name__} has no repository_path to filter by")
    return queryset.filter(**{f"{path}__in": repositories_for(user)})


def get_visible_or_404(user: AnyUser, queryset: models.QuerySet[M], **lookup) -> M:
    """One object the user may see; 404 (never 403) otherwise, so ids cannot be probed."""
    try:
        return visible_to(user, queryset).get(**lookup)
    except queryset.model.DoesNotExist:
        raise Http404(f"No {queryset.model._meta.verbose_name} matches this address.") from None


def has_repo_permission(user: AnyUser, repository: models.Model, permission: str) -> bool:
    """Whether `user`'s role on `repository` grants `permission` (e.g. roles.START_SESSION)."""
    return repositories_for(user, permission=permission).filter(pk=repository.pk).exists()


def require_repo_permission(user: AnyUser, repository: models.Model, permission: str) -> None:
    if not has_repo_permission(user, repository, permission):
        raise PermissionDenied(
            f"Your role on {repository.name} does not allow this; ask a repository admin."
        )
