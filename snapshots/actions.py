"""The writes on repositories' snapshots, each in one place for every caller (the dashboard,
the REST API, the CLI, tasks and the platform's own follow-ups)."""

from __future__ import annotations

from celery import current_app
from django.db import transaction

from accounts import access, roles
from snapshots.models import Repository

REFRESH_TASK = "snapshots.tasks.refresh_snapshot"


def snapshot_refresh_request(repository: Repository, *, user=None) -> None:
    """Queue a fresh snapshot build of `repository` once the current transaction commits (so
    the worker sees what led to it). `user`: who asked — they need REFRESH_SNAPSHOT there
    (PermissionDenied otherwise); None when the platform itself asks (a changed lockfile, a
    newly approved egress)."""
    if user is not None:
        access.require_repo_permission(user, repository, roles.REFRESH_SNAPSHOT)
    # By name: the task runs the build, which asks for refreshes through this module.
    transaction.on_commit(lambda: current_app.send_task(REFRESH_TASK, args=(repository.pk,)))
