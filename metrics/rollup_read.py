"""The Metrics page read from the rollups (metrics.models.DailyRollup): one query of the
range's (repository, day) rows, whatever the number of sessions in it.

The sums add up exactly to the reference computation's (metrics/queries.py); the percentiles
are read from the merged sketches, within sketch.RELATIVE_ACCURACY of the exact ones.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

import psycopg
from django.db import connection
from django.db.models import QuerySet

from metrics import sketch
from metrics.figures import MetricsReport, Period
from metrics.models import DailyRollup
from metrics.queries import PERCENTILES, SUM_FIELDS, PercentileRows, SumRows, metrics_report
from metrics.rollups import SKETCHES, refresh_marked
from snapshots.models import Repository

_SKETCH_COLUMNS = [
    f"{name}_{part}" for name in SKETCHES for part in ("first", "counts", "n", "exact")
]


def rollup_figures(
    ids: list[int], since: datetime, until: datetime, period: Period
) -> tuple[SumRows, PercentileRows]:
    """The sums per (repository, bucket) and the percentiles per bucket, per repository and
    overall of [since, until), from the rollups."""
    first = since.astimezone(UTC).date()
    last = (until - timedelta(microseconds=1)).astimezone(UTC).date()
    rows = _fetch(
        DailyRollup.objects.filter(repository_id__in=ids, day__gte=first, day__lte=last)
        .values_list("repository_id", "day", *SUM_FIELDS, *_SKETCH_COLUMNS)
        .order_by()
    )
    width = len(SUM_FIELDS)
    # Each sketch's columns (first lane, counts, n, exact) in the rows; each is merged into its
    # bucket and its repository (the groups) as the rows are read, and the total is the merge
    # of the buckets' merges (a few hundred additions, not one per row).
    at = {name: 2 + width + 4 * i for i, name in enumerate(SKETCHES)}
    merges = {
        name: sketch.GroupedMerge(min((row[i] for row in rows if row[i + 2]), default=0))
        for name, i in at.items()
    }
    placed = [(merges[name], i) for name, i in at.items()]
    buckets: dict[date, date] = {}
    sums: SumRows = []
    for row in rows:
        repo_id, day = row[0], row[1]
        bucket = buckets.get(day)
        if bucket is None:
            bucket = buckets[day] = day - timedelta(days=day.weekday()) if period == "week" else day
        sums.append((repo_id, bucket, list(row[2 : 2 + width])))
        groups = ((None, bucket), (repo_id, None))
        for merge, i in placed:
            if row[i + 2]:
                merge.add(groups, row[i], row[i + 1], row[i + 2], row[i + 3])
    found: dict[tuple, dict[str, float]] = defaultdict(dict)
    for name in SKETCHES:
        merged = merges[name].merged()
        total = sketch.Merged()
        for (of_repo, _), one in merged.items():
            if of_repo is None:  # a bucket's
                total.add(one)
        merged[(None, None)] = total
        wanted = [(figure, q) for figure, (value, q) in PERCENTILES.items() if value == name]
        for group, one in merged.items():
            values = one.percentiles(q for _, q in wanted)
            found[group].update(
                {figure: v for (figure, _), v in zip(wanted, values, strict=True) if v is not None}
            )
    percentiles: PercentileRows = [
        (repo_id, bucket, values) for (repo_id, bucket), values in found.items() if values
    ]
    return sums, percentiles


def _fetch(rows: QuerySet) -> list[tuple]:
    # On PostgreSQL, the same statement with binary results: the sketches arrive as bytes,
    # not as hex text to decode (a few times faster for a range's megabytes of sketches).
    if connection.vendor != "postgresql":
        return list(rows)
    sql, params = rows.query.sql_with_params()
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


def current_metrics_report(
    *,
    repositories: list[Repository],
    period: Period = "week",
    start: date,
    end: date,
    now: datetime | None = None,
) -> MetricsReport:
    """The Metrics page's report: the marked days recomputed first (none, usually: the task
    queued after each change has done it), then every figure from the rollups."""
    refresh_marked()
    return metrics_report(
        repositories=repositories, period=period, start=start, end=end, now=now,
        figures_of=rollup_figures,
    )  # fmt: skip
