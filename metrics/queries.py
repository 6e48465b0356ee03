"""Review metrics: what was accepted, and what it cost in review effort, sandbox time and money.

This is the reference computation, over the sessions themselves. The Metrics page reads the
same figures from per-day rollups (metrics/rollup_read.py, docs/metrics.md), which are computed
with this module's grouped queries and tested and benchmarked against it.

`metrics_report` computes every figure of the Metrics page for a set of repositories over a
date range, per day or per week, per repository and overall, in a fixed number of SQL queries
whatever the data, the range or the number of repositories:

- On PostgreSQL, one statement (`_PG_SQL`) and its SET LOCAL: the range's sessions, read from
  a covering index and LEFT JOINed to their pull request, are materialized once and read
  three times: sums per (repository, period), their PRs' review effort per (repository,
  period), and the percentiles (start latency, time to first review, time to merge) per
  period, per repository and overall (`percentile_cont` with GROUPING SETS).
- Elsewhere (SQLite), the same figures from three grouped ORM queries (sessions; PRs; review
  events) and one query of the range's values, ranked in Python as percentile_cont does.
- Then one query for the distinct prompt authors of the last five minutes, per repository
  ("humans prompting now").

Additive figures (counts, sums) are rolled up from the (repository, period) rows in Python;
averages are kept as sums and counts so that they roll up exactly.

One rule for every figure: it belongs to the period, and the range, in which its *session
started*. Session figures (sessions, cost, sandbox time, retries, verify, start latency,
snapshot age) by the session's own created_at; pull-request figures (PRs, merged, review and
merge times, rounds, lines, escaped defects) and the reviewer effort spent on a PR through the
join to their session. So a week's funnel (sessions → PRs → merged), its merged-PR rate and its
accepted change per reviewer hour all describe the same pieces of work: a PR opened just after
midnight from a session started the evening before counts with the evening's day, and not in a
range that starts at midnight. The newest periods still move as their PRs are reviewed and
merged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction
from django.db.models import (
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import TruncDay, TruncWeek
from django.utils import timezone

from metrics.figures import PERIODS, Figures, MetricsReport, Period
from metrics.scope import period_starts
from sessions.models import CIFix, Prompt, PullRequest, ReviewEvent, Session
from snapshots.models import Repository

# A code-host review (approved / changes requested / commented) carries no timing; it counts
# as this much reviewer effort unless the row says otherwise (seconds > 0).
REVIEW_DEFAULT_SECONDS = 300
PROMPTING_WINDOW = timedelta(minutes=5)


def metrics_report(
    *,
    repositories: list[Repository],
    period: Period = "week",
    start: date,
    end: date,
    now: datetime | None = None,
    figures_of: FiguresOf | None = None,
) -> MetricsReport:
    """All figures for `repositories` over [start, end] (dates, UTC, inclusive), per `period`.

    A fixed number of queries whatever the data (none when `repositories` is empty).
    `figures_of` gives the sums and percentiles: by default the reference computation over
    the sessions (this module); the page passes the rollups' (metrics/rollup_read.py).
    Raises ValueError for an unknown period.
    """
    if period not in PERIODS:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}")
    report = MetricsReport(period=period, start=start, end=end, repositories=list(repositories))
    buckets = period_starts(period, start, end)
    per_period = {b: Figures() for b in buckets}
    per_repo = {r.pk: Figures() for r in repositories}
    report.series = list(per_period.items())
    report.by_repository = [(r, per_repo[r.pk]) for r in repositories]
    if not repositories:
        return report

    ids = [r.pk for r in repositories]
    since = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    until = datetime.combine(end + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    figures_of = figures_of or reference_figures()
    sums, percentiles = figures_of(ids, since, until, period)
    # Roll the (repository, bucket) sums up per period, per repository and overall, column by
    # column with sum() (a 180-day range per day has thousands of rows), then make Figures.
    period_rows: dict[date, list[list[float]]] = defaultdict(list)
    repo_rows: dict[int, list[list[float]]] = defaultdict(list)
    for repo_id, bucket, values in sums:
        period_rows[bucket].append(values)
        repo_rows[repo_id].append(values)
    by_period = {bucket: _column_sums(rows) for bucket, rows in period_rows.items()}
    by_repo = {repo_id: _column_sums(rows) for repo_id, rows in repo_rows.items()}
    overall = _column_sums(list(by_period.values())) if by_period else [0] * len(SUM_FIELDS)
    for bucket, values in by_period.items():
        # A bucket outside the list cannot happen (same truncation), but never lose data.
        per_period.setdefault(bucket, Figures()).add(_figures_of_sums(values))
    for repo_id, values in by_repo.items():
        per_repo[repo_id].add(_figures_of_sums(values))
    report.total.add(_figures_of_sums(overall))
    for repo_id, bucket, values in percentiles:
        if repo_id is None and bucket is None:
            target = report.total
        elif repo_id is None:
            target = per_period.get(bucket)
        else:
            target = per_repo.get(repo_id)
        if target is not None:
            for name, value in values.items():
                setattr(target, name, value)

    report.prompting_now, report.prompting_now_by_repository = _prompting_now(
        ids, (now or timezone.now()) - PROMPTING_WINDOW
    )
    return report


# Rows of the computation: sums as (repository id, bucket, values in SUM_FIELDS' order) and
# percentiles as (repository id or None, bucket or None, {figure: value}); see
# _percentiles_python.
SumRows = list[tuple[int, date, list[float]]]
PercentileRows = list[tuple[int | None, date | None, dict[str, float]]]


FiguresOf = Callable[[list[int], datetime, datetime, Period], tuple[SumRows, PercentileRows]]


def reference_figures() -> FiguresOf:
    """The computation over the sessions themselves: one statement on PostgreSQL, grouped ORM
    queries elsewhere. The reference the rollups are tested and benchmarked against."""
    return _figures_postgresql if connection.vendor == "postgresql" else _figures_portable


def _column_sums(rows: list[list[float]]) -> list[float]:
    return [sum(column) for column in zip(*rows, strict=True)]


def _figures_of_sums(values: list[float]) -> Figures:
    # Sums may arrive as floats (PostgreSQL's array): counts become ints again.
    return Figures(**{
        name: type(getattr(_ZERO, name))(value or 0)
        for name, value in zip(SUM_FIELDS, values, strict=True)
    })  # fmt: skip


def _figures_portable(ids, since, until, period: Period) -> tuple[SumRows, PercentileRows]:
    """Any database (SQLite): three grouped ORM queries and the percentiles ranked in Python."""
    trunc = TruncWeek if period == "week" else TruncDay
    sums = [
        (repo_id, bucket, [getattr(figures, name) for name in SUM_FIELDS])
        for rows in (session_rows, pr_rows, review_rows, ci_fix_rows)
        for repo_id, bucket, figures in rows(ids, since, until, trunc)
    ]
    return sums, list(_percentiles_python(ids, since, until, period))


def _as_date(value) -> date:
    return value.date() if isinstance(value, datetime) else value


def _seconds(value: timedelta | None) -> float:
    return value.total_seconds() if value else 0.0


def _in_range(prefix: str, ids, since, until) -> dict:
    return {
        f"{prefix}repository_id__in": ids,
        f"{prefix}created_at__gte": since,
        f"{prefix}created_at__lt": until,
    }


def session_rows(ids, since, until, trunc):
    # Sessions alone, no join: the cheapest scan of the biggest table.
    rows = (
        Session.objects.filter(**_in_range("", ids, since, until))
        .annotate(bucket=trunc("created_at", tzinfo=UTC))
        .values("repository_id", "bucket")
        .annotate(
            sessions=Count("id"),
            # A review session's model cost is review cost, not work cost.
            cost=Sum("cost_usd", filter=~Q(purpose=Session.Purpose.REVIEW)),
            review_cost=Sum("cost_usd", filter=Q(purpose=Session.Purpose.REVIEW)),
            sandbox=Sum("sandbox_seconds"),
            retries_sum=Sum("retries"),
            verify_passed=Count("id", filter=Q(verify_ok=True)),
            verify_n=Count("verify_ok"),
            snapshot_n=Count("snapshot_age_s"),
            snapshot_sum=Sum("snapshot_age_s"),
        )
        .order_by()
    )
    for row in rows:
        yield (
            row["repository_id"],
            _as_date(row["bucket"]),
            Figures(
                sessions=row["sessions"],
                cost_usd=row["cost"] or 0.0,
                review_cost_usd=row["review_cost"] or 0.0,
                sandbox_s=row["sandbox"] or 0.0,
                retries=row["retries_sum"] or 0,
                verify_ok=row["verify_passed"],
                verify_n=row["verify_n"],
                snapshot_n=row["snapshot_n"],
                snapshot_s=row["snapshot_sum"] or 0.0,
            ),
        )


def duration(later: str, earlier: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(later) - F(earlier), output_field=DurationField())


def pr_rows(ids, since, until, trunc):
    # A PR counts with its session's cohort: range and bucket by the session's created_at.
    merged = Q(state=PullRequest.State.MERGED)
    reviewed = Q(first_review_at__isnull=False)
    rows = (
        PullRequest.objects.filter(**_in_range("session__", ids, since, until))
        .annotate(bucket=trunc("session__created_at", tzinfo=UTC))
        .values("session__repository_id", "bucket")
        .annotate(
            prs=Count("id"),
            merged=Count("id", filter=merged),
            closed=Count("id", filter=Q(state=PullRequest.State.CLOSED)),
            merged_lines=Sum(F("additions") + F("deletions"), filter=merged),
            escaped=Count("id", filter=merged & Q(reverted_at__isnull=False)),
            merged_rounds=Sum("review_rounds", filter=merged),
            reviewed=Count("id", filter=reviewed),
            first_review=Sum(duration("first_review_at", "created_at"), filter=reviewed),
            merge=Sum(
                duration("merged_at", "created_at"), filter=merged & Q(merged_at__isnull=False)
            ),
        )
        .order_by()
    )
    for row in rows:
        yield (
            row["session__repository_id"],
            _as_date(row["bucket"]),
            Figures(
                prs=row["prs"],
                merged=row["merged"],
                closed=row["closed"],
                merged_lines=row["merged_lines"] or 0,
                escaped=row["escaped"],
                merged_rounds=row["merged_rounds"] or 0,
                reviewed=row["reviewed"],
                first_review_s=_seconds(row["first_review"]),
                merge_s=_seconds(row["merge"]),
            ),
        )


def review_effort_seconds() -> Case:
    """The reviewer effort of one ReviewEvent, as an SQL expression: its measured seconds, or
    REVIEW_DEFAULT_SECONDS for a code-host review that carries none."""
    return Case(
        When(
            Q(seconds=0) & ~Q(kind=ReviewEvent.Kind.VIEWED),
            then=Value(REVIEW_DEFAULT_SECONDS),
        ),
        default=F("seconds"),
        output_field=IntegerField(),
    )


def review_rows(ids, since, until, trunc):
    # Effort counts with its PR's session's cohort, as merged PRs and lines do.
    pr = "pull_request__session__"
    rows = (
        ReviewEvent.objects.filter(**_in_range(pr, ids, since, until))
        .annotate(bucket=trunc(f"{pr}created_at", tzinfo=UTC))
        .values(f"{pr}repository_id", "bucket")
        .annotate(
            effort=Sum(review_effort_seconds()),
            reviews=Count("id", filter=~Q(kind=ReviewEvent.Kind.VIEWED)),
        )
        .order_by()
    )
    for row in rows:
        yield (
            row[f"{pr}repository_id"],
            _as_date(row["bucket"]),
            Figures(review_s=row["effort"] or 0, reviews=row["reviews"]),
        )


def ci_fix_rows(ids, since, until, trunc):
    # A CI-fix turn counts with its PR's session's cohort, as the PR does.
    pr = "pull_request__session__"
    rows = (
        CIFix.objects.filter(state=CIFix.State.QUEUED, **_in_range(pr, ids, since, until))
        .annotate(bucket=trunc(f"{pr}created_at", tzinfo=UTC))
        .values(f"{pr}repository_id", "bucket")
        .annotate(n=Count("id"), green=Count("id", filter=Q(outcome=CIFix.Outcome.GREEN)))
        .order_by()
    )
    for row in rows:
        yield (
            row[f"{pr}repository_id"],
            _as_date(row["bucket"]),
            Figures(ci_fixes=row["n"], ci_fixes_green=row["green"]),
        )


# Percentiles: rows of (repository id or None, bucket or None, {figure: value}); a row with
# both None is the total, with only a bucket a period, with only a repository a repository.
# Each figure: (value, fraction); the values are a session's and its pull request's.
PERCENTILES = {
    "start_p50_ms": ("start", 0.5),
    "start_p95_ms": ("start", 0.95),
    "first_review_p50_s": ("first_review", 0.5),
    "merge_p50_s": ("merge", 0.5),
}

# The PostgreSQL statement: one scan of the range's sessions, LEFT JOINed to their pull
# request (at most one per session, so no session is repeated), materialized once as `c` and
# read three times: sums per (repository, bucket), the reviews of its PRs per (repository,
# bucket), and percentiles per bucket, per repository and overall (GROUPING SETS).
# Each additive figure: (Figures attribute, aggregate over `c`).
_PG_SUMS = [
    ("sessions", "count(*)"),
    ("cost_usd", "sum(cost_usd) FILTER (WHERE purpose <> %(review)s)"),
    ("review_cost_usd", "sum(cost_usd) FILTER (WHERE purpose = %(review)s)"),
    ("sandbox_s", "sum(sandbox_seconds)"),
    ("retries", "sum(retries)"),
    ("verify_ok", "count(*) FILTER (WHERE verify_ok)"),
    ("verify_n", "count(verify_ok)"),
    ("snapshot_n", "count(snapshot_age_s)"),
    ("snapshot_s", "sum(snapshot_age_s)"),
    ("prs", "count(pr)"),
    ("merged", "count(*) FILTER (WHERE merged)"),
    ("closed", "count(*) FILTER (WHERE closed)"),
    ("merged_lines", "sum(lines) FILTER (WHERE merged)"),
    ("escaped", "count(*) FILTER (WHERE merged AND reverted)"),
    ("merged_rounds", "sum(review_rounds) FILTER (WHERE merged)"),
    ("reviewed", "count(first_review)"),
    ("first_review_s", "sum(first_review)"),
    ("merge_s", "sum(merge) FILTER (WHERE merged)"),
]
_PG_REVIEW_SUMS = ["review_s", "reviews"]
_PG_FIX_SUMS = ["ci_fixes", "ci_fixes_green"]
# The order of every SumRows' values (the PostgreSQL statement's array, for one).
SUM_FIELDS = [name for name, _ in _PG_SUMS] + _PG_REVIEW_SUMS + _PG_FIX_SUMS
assert sorted(SUM_FIELDS) == sorted(Figures._ADDITIVE)
_ZERO = Figures()
_PG_SQL = """
WITH c AS MATERIALIZED (
  SELECT s.repository_id AS repo, date_trunc({trunc}, s.created_at AT TIME ZONE 'UTC') AS bucket,
         s.cost_usd, s.purpose, s.sandbox_seconds, s.retries, s.verify_ok, s.snapshot_age_s,
         s.start_ms AS start, p.id AS pr, p.state = %(merged)s AS merged,
         p.state = %(closed)s AS closed, p.additions + p.deletions AS lines,
         p.reverted_at IS NOT NULL AS reverted, p.review_rounds,
         EXTRACT(EPOCH FROM p.first_review_at - p.created_at)::float8 AS first_review,
         EXTRACT(EPOCH FROM p.merged_at - p.created_at)::float8 AS merge
  FROM {session} s LEFT JOIN {pull_request} p ON p.session_id = s.id
  WHERE s.repository_id = ANY(%(ids)s) AND s.created_at >= %(since)s AND s.created_at < %(until)s
), sums AS (
  SELECT repo, bucket, ARRAY[{sums}]::float8[] AS v FROM c GROUP BY repo, bucket
), reviews AS (
  SELECT c.repo, c.bucket,
         sum(CASE WHEN r.seconds = 0 AND r.kind <> %(viewed)s THEN %(default_seconds)s
             ELSE r.seconds END) AS effort,
         count(*) FILTER (WHERE r.kind <> %(viewed)s) AS n
  FROM {review} r JOIN c ON r.pull_request_id = c.pr GROUP BY c.repo, c.bucket
), fixes AS (
  SELECT c.repo, c.bucket, count(*) AS n, count(*) FILTER (WHERE f.outcome = %(green)s) AS green
  FROM {ci_fix} f JOIN c ON f.pull_request_id = c.pr WHERE f.state = %(fix_queued)s
  GROUP BY c.repo, c.bucket
)
SELECT false, sums.repo, sums.bucket, 0, 0,
       sums.v || ARRAY[coalesce(reviews.effort, 0), coalesce(reviews.n, 0),
                       coalesce(fixes.n, 0), coalesce(fixes.green, 0)]::float8[]
FROM sums LEFT JOIN reviews ON reviews.repo = sums.repo AND reviews.bucket = sums.bucket
LEFT JOIN fixes ON fixes.repo = sums.repo AND fixes.bucket = sums.bucket
UNION ALL
SELECT true, repo, bucket, GROUPING(repo), GROUPING(bucket), ARRAY[{percentiles}]::float8[]
FROM c GROUP BY GROUPING SETS ((bucket), (repo), ())
"""
_PG_SETTINGS = "SELECT set_config('work_mem', '32MB', true), set_config('jit', 'off', true)"
# Literals, not parameters: the same expression appears in SELECT and GROUP BY.
_PG_TRUNC = {"day": "'day'", "week": "'week'"}


def _figures_postgresql(ids, since, until, period: Period) -> tuple[SumRows, PercentileRows]:
    """PostgreSQL: every figure in one statement (see _PG_SQL)."""
    quote = connection.ops.quote_name
    sql = _PG_SQL.format(
        trunc=_PG_TRUNC[period],
        session=quote(Session._meta.db_table),
        pull_request=quote(PullRequest._meta.db_table),
        review=quote(ReviewEvent._meta.db_table),
        ci_fix=quote(CIFix._meta.db_table),
        sums=", ".join(f"coalesce({aggregate}, 0)" for _, aggregate in _PG_SUMS),
        percentiles=", ".join(
            f"percentile_cont({q}) WITHIN GROUP (ORDER BY {value})"
            for value, q in PERCENTILES.values()
        ),
    )
    params = {
        "merged": PullRequest.State.MERGED.value,
        "closed": PullRequest.State.CLOSED.value,
        "review": Session.Purpose.REVIEW.value,
        "viewed": ReviewEvent.Kind.VIEWED.value,
        "default_seconds": REVIEW_DEFAULT_SECONDS,
        "green": CIFix.Outcome.GREEN.value,
        "fix_queued": CIFix.State.QUEUED.value,
        "ids": list(ids),
        "since": since,
        "until": until,
    }
    sums: SumRows = []
    percentiles: PercentileRows = []
    with transaction.atomic(), connection.cursor() as cursor:
        # For this transaction only (SET LOCAL; an outer one's, if the caller holds one): sort
        # and hash the range's rows in memory, and skip JIT compilation, which costs more
        # than it saves on a query of this size.
        cursor.execute(_PG_SETTINGS)
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for is_percentile, repo_id, bucket, g_repo, g_bucket, numbers in rows:
        if not is_percentile:
            sums.append((repo_id, _as_date(bucket), numbers))
            continue
        values = dict(zip(PERCENTILES, numbers, strict=True))
        values = {name: v for name, v in values.items() if v is not None}
        if values:  # the grand total of an empty range has none
            key_repo = None if g_repo else repo_id
            percentiles.append((key_repo, None if g_bucket else _as_date(bucket), values))
    return sums, percentiles


def percentile_cont(sorted_values: list[float], q: float) -> float | None:
    """PostgreSQL's percentile_cont: linear interpolation between the closest ranks."""
    if not sorted_values:
        return None
    position = q * (len(sorted_values) - 1)
    low, high = math.floor(position), math.ceil(position)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def _percentiles_python(ids, since, until, period):
    # SQLite has no ordered-set aggregates: fetch the values of the range (one query, the
    # same rows as _percentiles_pg's) and rank them here.
    rows = (
        Session.objects.filter(**_in_range("", ids, since, until))
        .annotate(
            first_review=duration("pull_request__first_review_at", "pull_request__created_at"),
            merge=duration("pull_request__merged_at", "pull_request__created_at"),
        )
        .values_list("repository_id", "created_at", "start_ms", "first_review", "merge")
        .order_by()
    )
    groups: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for repo_id, created, start_ms, first_review, merge in rows:
        day = created.astimezone(UTC).date()
        bucket = day - timedelta(days=day.weekday()) if period == "week" else day
        sample = {
            "start": start_ms,
            "first_review": first_review.total_seconds() if first_review is not None else None,
            "merge": merge.total_seconds() if merge is not None else None,
        }
        for key in ((None, bucket), (repo_id, None), (None, None)):
            for name, value in sample.items():
                if value is not None:
                    groups[key][name].append(value)
    for (repo_id, bucket), samples in groups.items():
        for values in samples.values():
            values.sort()
        figures = {name: percentile_cont(samples[v], q) for name, (v, q) in PERCENTILES.items()
                   if samples.get(v)}  # fmt: skip
        yield repo_id, bucket, figures


def _prompting_now(ids, since) -> tuple[int, dict[int, int]]:
    pairs = set(
        Prompt.objects.filter(session__repository_id__in=ids, created_at__gte=since)
        .values_list("session__repository_id", "author_id")
        .distinct()
    )
    per_repo: dict[int, int] = defaultdict(int)
    for repo_id, _ in pairs:
        per_repo[repo_id] += 1
    return len({author for _, author in pairs}), dict(per_repo)
