"""The API's metrics summary. Minimal on purpose: counts from Session and Prompt rows, for the
repositories whose metrics the user may see; the review-effort metrics of issue #7 will replace
it (inspect_web/metrics.py) once they exist."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count
from django.utils import timezone

from inspect_web import access, roles
from sessions.models import Prompt, Session


def metrics_summary(*, user, repository: str = "") -> list[dict]:
    repositories = access.repositories_for(user, permission=roles.VIEW_METRICS)
    if repository:
        repositories = repositories.filter(name=repository)
    week_ago = timezone.now() - timedelta(days=7)
    rows = []
    for repo in repositories.order_by("name"):
        sessions = Session.objects.filter(repository=repo)
        by_state = dict(sessions.values_list("state").annotate(n=Count("id")).order_by())
        rows.append(
            {
                "repository": repo.name,
                "sessions": sum(by_state.values()),
                "sessions_last_7_days": sessions.filter(created_at__gte=week_ago).count(),
                "prompts": Prompt.objects.filter(session__repository=repo).count(),
                "by_state": by_state,
            }
        )
    return rows
