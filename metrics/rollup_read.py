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
    sums: SumRows = []
    # Each stored sketch goes to its bucket, its repository and the total (the group keys).
    entries: dict[str, list[tuple[tuple, sketch.Stored]]] = {name: [] for name in SKETCHES}
    width = len(SUM_FIELDS)
    for row in rows:
        repo_id, day = row[0], row[1]
        bucket = day - timedelta(days=day.weekday()) if period == "week" else day
        sums.append((repo_id, bucket, list(row[2 : 2 + width])))
        stored = row[2 + width :]
        groups = ((None, bucket), (repo_id, None), (None, None))
        for i, name in enumerate(SKETCHES):
            first_lane, counts, n, exact = stored[4 * i : 4 * i + 4]
            if n:
                entries[name].append((groups, sketch.Stored(first_lane, counts, n, exact)))
    found: dict[tuple, dict[str, float]] = defaultdict(dict)
    for name, merged in ((name, sketch.merge_by(entries[name])) for name in SKETCHES):
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
