"""The API's metrics summary: session and prompt counts of the repositories whose metrics the
user may see, in three queries whatever the number of repositories.

The review-effort figures of the Metrics page (metrics/queries.py) are not in this
response yet; its shape is fixed by api.serializers.MetricsSerializer."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from accounts import access, roles
from sessions.models import Prompt, Session


def metrics_summary(*, user, repository: str = "") -> list[dict]:
    """One row per repository (by name) whose metrics `user` may see, or only `repository`
    (no rows when it is not one of them)."""
    repositories = access.repositories_for(user, permission=roles.VIEW_METRICS)
    if repository:
        repositories = repositories.filter(name=repository)
    repositories = list(repositories.order_by("name"))
    if not repositories:
        return []
    ids = [repo.pk for repo in repositories]
    week_ago = timezone.now() - timedelta(days=7)
    by_state: dict[int, dict[str, int]] = defaultdict(dict)
    recent: dict[int, int] = defaultdict(int)
    grouped = (
        Session.objects.filter(repository_id__in=ids)
        .values_list("repository_id", "state")
        .annotate(n=Count("id"), recent=Count("id", filter=Q(created_at__gte=week_ago)))
        .order_by()
    )
    for repo_id, state, n, n_recent in grouped:
        by_state[repo_id][state] = n
        recent[repo_id] += n_recent
    prompts = dict(
        Prompt.objects.filter(session__repository_id__in=ids)
        .values_list("session__repository_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return [
        {
            "repository": repo.name,
            "sessions": sum(by_state[repo.pk].values()),
            "sessions_last_7_days": recent[repo.pk],
            "prompts": prompts.get(repo.pk, 0),
            "by_state": by_state[repo.pk],
        }
        for repo in repositories
    ]
