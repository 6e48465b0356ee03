"""The Metrics page read from the rollups (metrics.models.DailyRollup): one query of the
range's (repository, day) rows, whatever the number of sessions in it.

The sums add up exactly to the reference computation's (metrics/queries.py); the percentiles
are read from the merged sketches, within sketch.RELATIVE_ACCURACY of the exact ones.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

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
    rows = (
        DailyRollup.objects.filter(repository_id__in=ids, day__gte=first, day__lte=last)
        .values_list("repository_id", "day", *SUM_FIELDS, *_SKETCH_COLUMNS)
        .order_by()
    )
    sums: SumRows = []
    # Per group (bucket or repository, each alone; the total from the buckets): one Merged per
    # sketch.
    by_bucket: dict[date, dict[str, sketch.Merged]] = defaultdict(_merged_set)
    by_repo: dict[int, dict[str, sketch.Merged]] = defaultdict(_merged_set)
    width = len(SUM_FIELDS)
    for row in rows:
        repo_id, day = row[0], row[1]
        bucket = day - timedelta(days=day.weekday()) if period == "week" else day
        sums.append((repo_id, bucket, list(row[2 : 2 + width])))
        stored = row[2 + width :]
        for i, name in enumerate(SKETCHES):
            first_lane, counts, n, exact = stored[4 * i : 4 * i + 4]
            if n:
                counts, exact = bytes(counts), bytes(exact)
                by_bucket[bucket][name].add(first_lane, counts, n, exact)
                by_repo[repo_id][name].add(first_lane, counts, n, exact)
    total = _merged_set()
    for merged in by_bucket.values():
        for name in SKETCHES:
            total[name].add_merged(merged[name])
    percentiles: PercentileRows = [
        (None, bucket, _percentiles(m)) for bucket, m in by_bucket.items()
    ]
    percentiles += [(repo_id, None, _percentiles(m)) for repo_id, m in by_repo.items()]
    percentiles.append((None, None, _percentiles(total)))
    return sums, [row for row in percentiles if row[2]]


def _merged_set() -> dict[str, sketch.Merged]:
    return {name: sketch.Merged() for name in SKETCHES}


def _percentiles(merged: dict[str, sketch.Merged]) -> dict[str, float]:
    out = {}
    for name in SKETCHES:
        wanted = [(figure, q) for figure, (value, q) in PERCENTILES.items() if value == name]
        found = merged[name].percentiles(q for _, q in wanted)
        out.update(
            {figure: v for (figure, _), v in zip(wanted, found, strict=True) if v is not None}
        )
    return out


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
