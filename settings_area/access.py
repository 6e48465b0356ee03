"""Who may open which settings page.

Site admins (staff or superusers) see every repository and the site's sections (models, GitHub,
sign-in); a repository admin sees their repositories' pages; anyone else sees no settings. A
repository the user is not a member of is a 404, never a 403, so names cannot be probed; a
member whose role does not manage it gets a 403 that says who can.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from accounts import access, roles
from snapshots.models import Repository


def is_site_admin(user) -> bool:
    return bool(user.is_authenticated and user.is_active and (user.is_superuser or user.is_staff))


def administered(user) -> QuerySet[Repository]:
    """The repositories whose settings `user` may change."""
    if is_site_admin(user):
        return Repository.objects.all()
    return access.repositories_for(user, permission=roles.MANAGE_REPOSITORY)


def may_open_settings(user) -> bool:
    return is_site_admin(user) or administered(user).exists()


def repository_for_settings(user, name: str) -> Repository:
    """The repository `name` if `user` administers it; 404 for a non-member, 403 for a member
    whose role does not manage it."""
    repository = administered(user).filter(name=name).first()
    if repository is not None:
        return repository
    if access.repositories_for(user).filter(name=name).exists():
        raise PermissionDenied(
            f"Only an admin of {name} changes its settings; ask one of its admins."
        )
    raise Http404("No repository matches this address.")


def require_site_admin(user) -> None:
    if not is_site_admin(user):
        raise PermissionDenied("Only a site admin changes this; ask one.")
