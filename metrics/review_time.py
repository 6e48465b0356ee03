"""The review-time write: time a reviewer spends on a pull request's review page counts as
review effort (a `viewed` ReviewEvent), which the Metrics page adds to code-host reviews."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.cache import cache
from django.db.models import F
from django.utils import timezone

from sessions.models import PullRequest, ReviewEvent
from sessions.totals import totals_changed

REVIEW_PING_SECONDS = 30  # how often the review panel pings while visible
REVIEW_PING_CAP = 60  # the most one ping may add


def review_time_record(
    *, user, pull_request: PullRequest, seconds: int, now: datetime | None = None
) -> int:
    """Add time `user` spent on `pull_request`'s review page to today's `viewed` ReviewEvent
    (one row per reviewer, PR and day); returns the seconds counted.

    A ping adds at most REVIEW_PING_CAP seconds, and never more than the time since the same
    user's previous ping on that PR (kept in the cache), so several tabs or a chatty client
    cannot inflate effort. The PR's own author earns nothing: reading one's own change is not
    review. The caller checks that `user` is a member of the PR's repository.
    """
    now = now or timezone.now()
    if pull_request.author_id == user.pk:
        return 0
    counted = max(0, min(int(seconds), REVIEW_PING_CAP))
    key = f"review-ping:{user.pk}:{pull_request.pk}"
    previous = cache.get(key)
    cache.set(key, now.timestamp(), timeout=3600)
    if previous is not None:
        counted = min(counted, int(now.timestamp() - previous))
    if counted <= 0:
        return 0
    day_start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    row = (
        ReviewEvent.objects.filter(
            pull_request=pull_request,
            reviewer=user,
            kind=ReviewEvent.Kind.VIEWED,
            created_at__gte=day_start,
        )
        .order_by("created_at")
        .first()
    )
    if row is None:
        ReviewEvent.objects.create(
            pull_request=pull_request,
            reviewer=user,
            reviewer_login=user.get_username(),
            kind=ReviewEvent.Kind.VIEWED,
            seconds=counted,
            created_at=now,
        )
    else:
        # An UPDATE with F(): two pings at once both count, neither overwrites the other.
        ReviewEvent.objects.filter(pk=row.pk).update(seconds=F("seconds") + counted)
        totals_changed([pull_request.session_id])
    return counted
