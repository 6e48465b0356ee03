"""Keeping the Metrics page's rollups (metrics.models.DailyRollup) current.

A rollup is never incremented: the rollup of a (repository, day) is recomputed whole from its
sessions, pull requests and reviews, with the reference queries of metrics/queries.py, so a
replayed update or a late webhook cannot count twice. What changes is found by marks
(RollupMark): the code that changes a session's totals, a pull request or a review leaves one
in its own transaction (`mark_sessions`, through the signals connected in `connect_marks`);
`refresh_marked` claims the marks, recomputes their days and deletes them in one transaction.
It runs from the Celery task queued after a change (and every few minutes from beat, in case
that task was lost), and before the Metrics page reads, so the page is never behind a committed
change. `rebuild_rollups` recomputes every day (backfill: the
data migration, `manage.py inspect metrics rollups --rebuild`, the `rebuild_rollups` task).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from celery import current_app
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, F, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncDate, TruncDay
from django.db.models.signals import post_delete, post_save

from metrics import sketch
from metrics.models import AuthorDailyRollup, DailyRollup, RollupMark
from metrics.queries import (
    SUM_FIELDS,
    ci_fix_rows,
    duration,
    pr_rows,
    review_rows,
    session_rows,
)
from sessions.models import PullRequest, ReviewEvent, Session
from sessions.totals import session_totals_changed

log = logging.getLogger(__name__)

REFRESH_TASK = "metrics.tasks.refresh_rollups"
REFRESH_QUEUED_KEY = "metrics:rollups:refresh-queued"
REFRESH_DELAY_S = 5  # changes within this share one queued refresh
WINDOW_DAYS = 31  # a rebuild computes this many days per step
_LOCK_KEY = 0x6D657472  # the PostgreSQL advisory lock that serializes refreshes
# The sketches of a rollup: the names of queries.PERCENTILES' values.
SKETCHES = ("start", "first_review", "merge")


# -- marks ---------------------------------------------------------------------------------------
def mark_sessions(sessions: QuerySet[Session]) -> None:
    """Mark the (repository, day) of each of `sessions` stale, in the caller's transaction, and
    queue a refresh for after it commits."""
    pairs = set(
        sessions.annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values_list("repository_id", "day")
        .order_by()
    )
    mark_days(pairs)


def mark_days(pairs: Iterable[tuple[int, date]]) -> None:
    rows = [RollupMark(repository_id=repo_id, day=day) for repo_id, day in set(pairs)]
    if not rows:
        return
    RollupMark.objects.bulk_create(rows)
    transaction.on_commit(_queue_refresh)


def _queue_refresh() -> None:
    # One queued refresh per REFRESH_DELAY_S however many changes (cache.add is atomic). The
    # change is committed and marked whatever happens here: if the broker or the cache is
    # down, the page's own refresh and the periodic one recompute the day.
    try:
        if cache.add(REFRESH_QUEUED_KEY, 1, timeout=REFRESH_DELAY_S):
            current_app.send_task(REFRESH_TASK, countdown=REFRESH_DELAY_S)
    except Exception as exc:  # noqa: BLE001 - any broker or cache failure: the mark stays
        log.warning("could not queue the metrics rollups' refresh (%s); the mark stays", exc)


def _on_session_saved(sender, instance: Session, **kwargs) -> None:
    mark_days([(instance.repository_id, instance.created_at.astimezone(UTC).date())])


def _on_pull_request_saved(sender, instance: PullRequest, **kwargs) -> None:
    mark_sessions(Session.objects.filter(pk=instance.session_id))


def _on_review_saved(sender, instance: ReviewEvent, **kwargs) -> None:
    mark_sessions(Session.objects.filter(pull_request=instance.pull_request_id))


def _on_totals_changed(sender, session_ids: Iterable[int], **kwargs) -> None:
    mark_sessions(Session.objects.filter(pk__in=list(session_ids)))


def connect_marks() -> None:
    """Connect the receivers that leave marks (MetricsConfig.ready)."""
    for model, receiver in (
        (Session, _on_session_saved),
        (PullRequest, _on_pull_request_saved),
        (ReviewEvent, _on_review_saved),
    ):
        for signal in (post_save, post_delete):
            signal.connect(receiver, sender=model, dispatch_uid=f"metrics-rollup-{model.__name__}")
    session_totals_changed.connect(_on_totals_changed, dispatch_uid="metrics-rollup-totals")


# -- computing ----------------------------------------------------------------------------------
def _window(first: date, last: date) -> tuple[datetime, datetime]:
    since = datetime.combine(first, datetime.min.time(), tzinfo=UTC)
    return since, datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=UTC)


def _compute(ids: list[int], first: date, last: date) -> list[DailyRollup]:
    """The rollups of `ids` for the days first..last, from the reference queries."""
    since, until = _window(first, last)
    rollups: dict[tuple[int, date], DailyRollup] = {}
    for rows in (session_rows, pr_rows, review_rows, ci_fix_rows):
        for repo_id, day, figures in rows(ids, since, until, TruncDay):
            rollup = rollups.setdefault((repo_id, day), DailyRollup(repository_id=repo_id, day=day))
            for name in SUM_FIELDS:
                setattr(rollup, name, getattr(rollup, name) + getattr(figures, name))
    samples: dict[tuple[int, date], dict[str, list[float]]] = defaultdict(
        lambda: {name: [] for name in SKETCHES}
    )
    values = (
        Session.objects.filter(repository_id__in=ids, created_at__gte=since, created_at__lt=until)
        .annotate(
            first_review=duration("pull_request__first_review_at", "pull_request__created_at"),
            merge=duration("pull_request__merged_at", "pull_request__created_at"),
        )
        .values_list("repository_id", "created_at", "start_ms", "first_review", "merge")
        .order_by()
    )
    for repo_id, created, start_ms, first_review, merge in values.iterator(chunk_size=20_000):
        bucket = samples[(repo_id, created.astimezone(UTC).date())]
        if start_ms is not None:
            bucket["start"].append(start_ms)
        if first_review is not None:
            bucket["first_review"].append(first_review.total_seconds())
        if merge is not None:
            bucket["merge"].append(merge.total_seconds())
    for key, by_name in samples.items():
        rollup = rollups.setdefault(key, DailyRollup(repository_id=key[0], day=key[1]))
        for name, found in by_name.items():
            first_lane, counts = sketch.encode(found)
            setattr(rollup, f"{name}_first", first_lane)
            setattr(rollup, f"{name}_counts", counts)
            setattr(rollup, f"{name}_n", len(found))
            setattr(rollup, f"{name}_exact", sketch.encode_exact(found))
    return list(rollups.values())


def _compute_authors(ids: list[int], first: date, last: date) -> list[AuthorDailyRollup]:
    since, until = _window(first, last)
    in_range = Q(repository_id__in=ids, created_at__gte=since, created_at__lt=until)
    merged = Q(pull_request__state=PullRequest.State.MERGED)
    rows = (
        Session.objects.filter(in_range)
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("repository_id", "day", "creator_id")
        .annotate(
            n=Count("id"),
            usd=Sum("cost_usd", filter=~Q(purpose=Session.Purpose.REVIEW)),  # work cost only
            sandbox=Sum("sandbox_seconds"),
            prs=Count("pull_request"),
            merged=Count("pull_request", filter=merged),
            lines=Sum(F("pull_request__additions") + F("pull_request__deletions"), filter=merged),
        )
        .order_by()
    )
    return [
        AuthorDailyRollup(
            repository_id=row["repository_id"], day=row["day"], author_id=row["creator_id"],
            sessions=row["n"], cost_usd=row["usd"] or 0.0, sandbox_s=row["sandbox"] or 0.0,
            prs=row["prs"], merged=row["merged"], merged_lines=row["lines"] or 0,
        )
        for row in rows
        if row["creator_id"] is not None
    ]  # fmt: skip


def _replace(ids: list[int], first: date, last: date) -> int:
    """Recompute and replace the rollups of `ids` over first..last; returns rows written."""
    made = _compute(ids, first, last)
    authors = _compute_authors(ids, first, last)
    span = {"repository_id__in": ids, "day__gte": first, "day__lte": last}
    DailyRollup.objects.filter(**span).delete()
    AuthorDailyRollup.objects.filter(**span).delete()
    DailyRollup.objects.bulk_create(made, batch_size=2000)
    AuthorDailyRollup.objects.bulk_create(authors, batch_size=2000)
    return len(made)


def _serialize() -> None:
    # One refresher at a time (until the transaction ends): two could otherwise write the same
    # day from different snapshots. SQLite serializes writers anyway.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])


def recompute(ids: list[int], first: date, last: date) -> int:
    """Recompute the rollups of repositories `ids` over the days first..last (rows written)."""
    with transaction.atomic():
        _serialize()
        return _replace(ids, first, last)


def refresh_marked(limit: int = 50_000) -> int:
    """Recompute every marked (repository, day) (at most `limit` marks per call) and delete
    its marks; returns the number of marks handled. Marks left by a transaction that commits
    meanwhile stay for the next call, so no change is missed."""
    if not RollupMark.objects.exists():
        return 0
    with transaction.atomic():
        _serialize()
        marks = list(
            RollupMark.objects.order_by("id").values_list("id", "repository_id", "day")[:limit]
        )
        if not marks:
            return 0
        days: dict[int, list[date]] = defaultdict(list)
        for _, repo_id, day in marks:
            days[repo_id].append(day)
        # One recomputation per repository and run of nearby marked days (usually just today;
        # a late webhook about an old session adds its own day, not the months between).
        for repo_id, marked in days.items():
            for first, last in _runs(sorted(set(marked))):
                _replace([repo_id], first, last)
        RollupMark.objects.filter(id__in=[mark_id for mark_id, _, _ in marks]).delete()
    return len(marks)


def _runs(days: list[date], gap: int = 3) -> list[tuple[date, date]]:
    """Sorted days as (first, last) spans, a new span where `gap` or more days are unmarked."""
    runs: list[tuple[date, date]] = []
    for day in days:
        if runs and (day - runs[-1][1]).days <= gap:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    return runs


def rebuild_rollups() -> dict:
    """Recompute every rollup from scratch, WINDOW_DAYS at a time; returns what was made."""
    with transaction.atomic():
        _serialize()
        RollupMark.objects.all().delete()  # what they mark is recomputed below
        DailyRollup.objects.all().delete()
        AuthorDailyRollup.objects.all().delete()
        ids = list(Session.objects.values_list("repository_id", flat=True).distinct().order_by())
        oldest = Session.objects.aggregate(oldest=Min("created_at"))["oldest"]
        made = 0
        if oldest is not None:
            first = oldest.astimezone(UTC).date()
            newest = Session.objects.order_by("-created_at").values_list("created_at", flat=True)[0]
            last = newest.astimezone(UTC).date()
            while first <= last:
                step_last = min(last, first + timedelta(days=WINDOW_DAYS - 1))
                made += _replace(ids, first, step_last)
                first = step_last + timedelta(days=1)
    return {"rollups": made, "repositories": len(ids)}
