"""Roles: each repository role is a Django group whose permissions say what it may do.

`ROLE_PERMISSIONS` is the one table; `sync_role_groups` writes it into the groups after every
migrate. Checks read the groups (see accounts.access), so an admin may extend a role in the
Django admin without a code change.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Group, Permission

from accounts.models import Role

START_SESSION = "agent_sessions.add_session"
PROMPT_SESSION = "agent_sessions.prompt_session"
STOP_SESSION = "agent_sessions.stop_session"
REFRESH_SNAPSHOT = "snapshots.add_snapshot"
DECIDE_APPROVAL = "approvals.decide_approvalrequest"
VIEW_METRICS = "snapshots.view_metrics"
MANAGE_REPOSITORY = "snapshots.manage_repository"

_ENGINEER = [START_SESSION, PROMPT_SESSION, STOP_SESSION, REFRESH_SNAPSHOT]

ROLE_PERMISSIONS: dict[str, list[str]] = {
    Role.ENGINEER: _ENGINEER,
    Role.REVIEWER: [DECIDE_APPROVAL],
    Role.MANAGER: [VIEW_METRICS],
    Role.ADMIN: [*_ENGINEER, DECIDE_APPROVAL, VIEW_METRICS, MANAGE_REPOSITORY],
}


def _permission(dotted: str) -> Permission:
    app_label, codename = dotted.split(".", 1)
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def sync_role_groups() -> None:
    """Create the role groups and grant each the permissions of the table (idempotent)."""
    for role, permissions in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.add(*[_permission(p) for p in permissions])


def on_post_migrate(sender: Any, app_config: Any = None, **kwargs: Any) -> None:
    # Runs once per migrated app; act after the last of ours, when every permission exists.
    if app_config is None or app_config.label != "approvals":
        return
    for config in apps.get_app_configs():
        create_permissions(config, verbosity=0, using=kwargs.get("using", "default"))
    sync_role_groups()
