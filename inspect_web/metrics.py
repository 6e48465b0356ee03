"""Review metrics: what was accepted, and what it cost in review effort, sandbox time and money.

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
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from django.core.exceptions import PermissionDenied
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
from django.http import Http404
from django.utils import timezone

from accounts import access, roles
from sessions.models import Prompt, PullRequest, ReviewEvent, Session
from snapshots.models import Repository

Period = Literal["day", "week"]
PERIODS: tuple[Period, ...] = ("day", "week")
DEFAULT_DAYS = 90
MAX_DAYS = 731
# A code-host review (approved / changes requested / commented) carries no timing; it counts
# as this much reviewer effort unless the row says otherwise (seconds > 0).
REVIEW_DEFAULT_SECONDS = 300
PROMPTING_WINDOW = timedelta(minutes=5)


@dataclass
class Figures:
    """The figures of one period, one repository, or everything. Counts and sums are stored;
    rates and averages are derived, so that figures add up (`add`)."""

    sessions: int = 0
    prs: int = 0
    merged: int = 0
    closed: int = 0
    merged_lines: int = 0
    escaped: int = 0
    merged_rounds: int = 0
    reviewed: int = 0
    first_review_s: float = 0.0
    merge_s: float = 0.0
    review_s: int = 0
    reviews: int = 0
    cost_usd: float = 0.0
    sandbox_s: float = 0.0
    retries: int = 0
    verify_ok: int = 0
    verify_n: int = 0
    snapshot_n: int = 0
    snapshot_s: float = 0.0
    # From the percentile query (not additive).
    start_p50_ms: float | None = None
    start_p95_ms: float | None = None
    first_review_p50_s: float | None = None
    merge_p50_s: float | None = None

    _ADDITIVE = (
        ["sessions", "prs", "merged", "closed", "merged_lines", "escaped", "merged_rounds"]
        + ["reviewed", "first_review_s", "merge_s", "review_s", "reviews", "cost_usd"]
        + ["sandbox_s", "retries", "verify_ok", "verify_n", "snapshot_n", "snapshot_s"]
    )

    def add(self, other: Figures) -> None:
        for name in self._ADDITIVE:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    # Derived figures; None where the denominator is zero (shown as "–", empty in CSV).
    @property
    def pr_rate(self) -> float | None:
        return _ratio(self.prs, self.sessions)

    @property
    def merged_rate(self) -> float | None:
        return _ratio(self.merged, self.prs)

    @property
    def first_review_avg_s(self) -> float | None:
        return _ratio(self.first_review_s, self.reviewed)

    @property
    def merge_avg_s(self) -> float | None:
        return _ratio(self.merge_s, self.merged)

    @property
    def rounds_per_merged(self) -> float | None:
        return _ratio(self.merged_rounds, self.merged)

    @property
    def reviewer_minutes(self) -> float:
        return self.review_s / 60

    @property
    def merged_per_reviewer_hour(self) -> float | None:
        return _ratio(self.merged, self.review_s / 3600)

    @property
    def lines_per_reviewer_hour(self) -> float | None:
        return _ratio(self.merged_lines, self.review_s / 3600)

    @property
    def sandbox_minutes(self) -> float:
        return self.sandbox_s / 60

    @property
    def cost_per_merged(self) -> float | None:
        return _ratio(self.cost_usd, self.merged)

    @property
    def retries_per_session(self) -> float | None:
        return _ratio(self.retries, self.sessions)

    @property
    def verify_pass_rate(self) -> float | None:
        return _ratio(self.verify_ok, self.verify_n)

    @property
    def escaped_rate(self) -> float | None:
        return _ratio(self.escaped, self.merged)

    @property
    def snapshot_age_avg_s(self) -> float | None:
        return _ratio(self.snapshot_s, self.snapshot_n)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


@dataclass(frozen=True)
class Column:
    """One figure as the tables, the CSV and the charts show it."""

    key: str  # attribute of Figures
    label: str
    unit: str  # "count", "pct", "minutes", "hours", "usd", "ms", "ratio"
    csv: str


# The order of the tables and the CSV.
COLUMNS: list[Column] = [
    Column("sessions", "Sessions", "count", "sessions"),
    Column("prs", "PRs", "count", "prs"),
    Column("merged", "Merged", "count", "merged_prs"),
    Column("merged_rate", "Merged-PR rate", "pct", "merged_pr_rate"),
    Column("pr_rate", "Sessions with a PR", "pct", "sessions_with_pr_rate"),
    Column("first_review_p50_s", "First review p50", "hours", "first_review_p50_hours"),
    Column("first_review_avg_s", "First review avg", "hours", "first_review_avg_hours"),
    Column("merge_p50_s", "Merge p50", "hours", "time_to_merge_p50_hours"),
    Column("merge_avg_s", "Merge avg", "hours", "time_to_merge_avg_hours"),
    Column("rounds_per_merged", "Review rounds", "ratio", "review_rounds_per_merged_pr"),
    Column("reviewer_minutes", "Reviewer min", "minutes", "reviewer_minutes"),
    Column("merged_per_reviewer_hour", "Merged / rev. hour", "ratio",
           "merged_prs_per_reviewer_hour"),
    Column("merged_lines", "Merged lines", "count", "merged_lines"),
    Column("lines_per_reviewer_hour", "Lines / rev. hour", "ratio",
           "merged_lines_per_reviewer_hour"),
    Column("sandbox_minutes", "Sandbox min", "minutes", "sandbox_minutes"),
    Column("cost_usd", "Model cost", "usd", "model_cost_usd"),
    Column("cost_per_merged", "Cost / merged PR", "usd", "cost_per_merged_pr_usd"),
    Column("retries_per_session", "Retries / session", "ratio", "retries_per_session"),
    Column("verify_pass_rate", "Verify pass", "pct", "verify_pass_rate"),
    Column("escaped", "Escaped defects", "count", "escaped_defects"),
    Column("start_p50_ms", "Start p50", "ms", "start_latency_p50_ms"),
    Column("start_p95_ms", "Start p95", "ms", "start_latency_p95_ms"),
    Column("snapshot_age_avg_s", "Snapshot age", "minutes_s", "snapshot_age_avg_minutes"),
]  # fmt: skip


@dataclass
class MetricsReport:
    period: Period
    start: date
    end: date  # inclusive
    repositories: list[Repository]
    total: Figures = field(default_factory=Figures)
    series: list[tuple[date, Figures]] = field(default_factory=list)
    by_repository: list[tuple[Repository, Figures]] = field(default_factory=list)
    prompting_now: int = 0
    prompting_now_by_repository: dict[int, int] = field(default_factory=dict)


# --------------------------------------------------------------------------- scope


def metrics_repositories(user: access.AnyUser) -> list[Repository]:
    """Repositories whose metrics `user` may see (manager or admin role), by name."""
    return list(access.repositories_for(user, permission=roles.VIEW_METRICS).order_by("name"))


def metrics_scope(
    user: access.AnyUser, *, repository: str = "", allowed: list[Repository] | None = None
) -> list[Repository]:
    """The repositories a metrics request covers: all `user` may see, or the one named.

    Raises Http404 when the named repository is not one the user is a member of (it may not
    exist, and ids must not be probed) and PermissionDenied when they are a member whose role
    does not grant VIEW_METRICS.
    """
    allowed = metrics_repositories(user) if allowed is None else allowed
    if not repository:
        return allowed
    for repo in allowed:
        if repo.name == repository:
            return [repo]
    member_of = access.repositories_for(user).filter(name=repository).first()
    if member_of is None:
        raise Http404("No repository matches this name.")
    raise PermissionDenied(
        f"Your role on {member_of.name} does not show its metrics; ask a repository admin "
        "for the manager role."
    )


def parse_range(
    start: str | None, end: str | None, *, today: date | None = None
) -> tuple[date, date]:
    """Dates from ISO strings (either may be empty): the default is the last DEFAULT_DAYS days.
    Raises ValueError with a message a person can act on."""
    today = today or timezone.now().astimezone(UTC).date()
    try:
        last = date.fromisoformat(end) if end else today
        first = date.fromisoformat(start) if start else last - timedelta(days=DEFAULT_DAYS - 1)
    except ValueError:
        raise ValueError("Dates must look like 2026-01-31.") from None
    if first > last:
        raise ValueError(f"The range starts ({first}) after it ends ({last}).")
    if (last - first).days >= MAX_DAYS:
        raise ValueError(f"A range covers at most {MAX_DAYS} days.")
    return first, last


def period_starts(period: Period, start: date, end: date) -> list[date]:
    """Every bucket of the range, oldest first (weeks begin on Monday, as TruncWeek's)."""
    if period == "week":
        first = start - timedelta(days=start.weekday())
        step = timedelta(days=7)
    else:
        first, step = start, timedelta(days=1)
    out, current = [], first
    while current <= end:
        out.append(current)
        current += step
    return out


# --------------------------------------------------------------------------- computation


def metrics_report(
    *,
    repositories: list[Repository],
    period: Period = "week",
    start: date,
    end: date,
    now: datetime | None = None,
) -> MetricsReport:
    """All figures for `repositories` over [start, end] (dates, UTC, inclusive), per `period`.

    A fixed number of queries whatever the data (none when `repositories` is empty).
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
    figures_of = _figures_postgresql if connection.vendor == "postgresql" else _figures_portable
    sums, percentiles = figures_of(ids, since, until, period)
    # Roll the (repository, bucket) sums up per period, per repository and overall, as plain
    # lists (a 180-day range per day has thousands of rows), then make Figures of them.
    width = len(SUM_FIELDS)
    by_period: dict[date, list[float]] = defaultdict(lambda: [0] * width)
    by_repo: dict[int, list[float]] = defaultdict(lambda: [0] * width)
    overall = [0] * width
    for repo_id, bucket, values in sums:
        for acc in (by_period[bucket], by_repo[repo_id], overall):
            acc[:] = [a + v for a, v in zip(acc, values, strict=True)]
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
        for rows in (_session_rows, _pr_rows, _review_rows)
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


def _session_rows(ids, since, until, trunc):
    # Sessions alone, no join: the cheapest scan of the biggest table.
    rows = (
        Session.objects.filter(**_in_range("", ids, since, until))
        .annotate(bucket=trunc("created_at", tzinfo=UTC))
        .values("repository_id", "bucket")
        .annotate(
            sessions=Count("id"),
            cost=Sum("cost_usd"),
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
                sandbox_s=row["sandbox"] or 0.0,
                retries=row["retries_sum"] or 0,
                verify_ok=row["verify_passed"],
                verify_n=row["verify_n"],
                snapshot_n=row["snapshot_n"],
                snapshot_s=row["snapshot_sum"] or 0.0,
            ),
        )


def _duration(later: str, earlier: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(later) - F(earlier), output_field=DurationField())


def _pr_rows(ids, since, until, trunc):
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
            first_review=Sum(_duration("first_review_at", "created_at"), filter=reviewed),
            merge=Sum(
                _duration("merged_at", "created_at"), filter=merged & Q(merged_at__isnull=False)
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


def _review_rows(ids, since, until, trunc):
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


# Percentiles: rows of (repository id or None, bucket or None, {figure: value}); a row with
# both None is the total, with only a bucket a period, with only a repository a repository.
# Each figure: (value, fraction); the values are a session's and its pull request's.
_PERCENTILES = {
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
    ("cost_usd", "sum(cost_usd)"),
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
# The order of every SumRows' values (the PostgreSQL statement's array, for one).
SUM_FIELDS = [name for name, _ in _PG_SUMS] + _PG_REVIEW_SUMS
assert sorted(SUM_FIELDS) == sorted(Figures._ADDITIVE)
_ZERO = Figures()
_PG_SQL = """
WITH c AS MATERIALIZED (
  SELECT s.repository_id AS repo, date_trunc({trunc}, s.created_at AT TIME ZONE 'UTC') AS bucket,
         s.cost_usd, s.sandbox_seconds, s.retries, s.verify_ok, s.snapshot_age_s,
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
)
SELECT false, sums.repo, sums.bucket, 0, 0,
       sums.v || ARRAY[coalesce(reviews.effort, 0), coalesce(reviews.n, 0)]::float8[]
FROM sums LEFT JOIN reviews ON reviews.repo = sums.repo AND reviews.bucket = sums.bucket
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
        sums=", ".join(f"coalesce({aggregate}, 0)" for _, aggregate in _PG_SUMS),
        percentiles=", ".join(
            f"percentile_cont({q}) WITHIN GROUP (ORDER BY {value})"
            for value, q in _PERCENTILES.values()
        ),
    )
    params = {
        "merged": PullRequest.State.MERGED.value,
        "closed": PullRequest.State.CLOSED.value,
        "viewed": ReviewEvent.Kind.VIEWED.value,
        "default_seconds": REVIEW_DEFAULT_SECONDS,
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
        values = dict(zip(_PERCENTILES, numbers, strict=True))
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
            first_review=_duration("pull_request__first_review_at", "pull_request__created_at"),
            merge=_duration("pull_request__merged_at", "pull_request__created_at"),
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
        figures = {name: percentile_cont(samples[v], q) for name, (v, q) in _PERCENTILES.items()
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


# --------------------------------------------------------------------------- presentation


def figure_value(figures: Figures, column: Column) -> float | None:
    """The column's value in its display unit (hours, minutes, percent ...), unrounded."""
    value = getattr(figures, column.key)
    if value is None:
        return None
    if column.unit == "pct":
        return value * 100
    if column.unit == "hours":
        return value / 3600
    if column.unit == "minutes_s":
        return value / 60
    return value


def format_value(figures: Figures, column: Column) -> str:
    value = figure_value(figures, column)
    if value is None:
        return "–"
    if column.unit == "count":
        return f"{int(value):,}"
    if column.unit == "pct":
        return f"{value:.1f}%"
    if column.unit == "usd":
        return f"${value:,.2f}"
    if column.unit == "ms":
        return f"{value:,.0f} ms"
    if column.unit in {"minutes", "minutes_s"}:
        return f"{value:,.1f} min" if column.unit == "minutes_s" else f"{value:,.0f}"
    if column.unit == "hours":
        return f"{value:,.1f} h"
    return f"{value:,.2f}"


def csv_rows(report: MetricsReport) -> list[list[str]]:
    """The report as CSV rows: a header, one row per period for the scope, then each
    repository's totals and the overall total (period_start "total")."""
    scope = report.repositories[0].name if len(report.repositories) == 1 else "all"
    header = ["period_start", "period", "repository", *[c.csv for c in COLUMNS]]
    header.append("humans_prompting_now")

    def line(label: str, repository: str, figures: Figures, prompting: str = "") -> list[str]:
        cells = []
        for column in COLUMNS:
            value = figure_value(figures, column)
            cells.append("" if value is None else _csv_number(value, column))
        return [label, report.period, repository, *cells, prompting]

    rows = [header]
    rows += [line(b.isoformat(), scope, f) for b, f in report.series]
    for repo, figures in report.by_repository:
        count = report.prompting_now_by_repository.get(repo.pk, 0)
        rows.append(line("total", repo.name, figures, str(count)))
    if len(report.repositories) != 1:
        rows.append(line("total", "all", report.total, str(report.prompting_now)))
    return rows


def _csv_number(value: float, column: Column) -> str:
    if column.unit == "count":
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def _epoch(day: date) -> int:
    return int(datetime.combine(day, datetime.min.time(), tzinfo=UTC).timestamp())


def chart_data(report: MetricsReport) -> dict:
    """The series the page's charts draw (uPlot wants parallel arrays, x in epoch seconds)."""
    xs = [_epoch(b) for b, _ in report.series]

    def column(key: str) -> list[float | None]:
        col = next(c for c in COLUMNS if c.key == key)
        out = []
        for _, figures in report.series:
            value = figure_value(figures, col)
            out.append(None if value is None else round(value, 3))
        return out

    # One chart per unit, so that no series is flattened by another's scale.
    return {
        "x": xs,
        "period": report.period,
        "charts": [
            {"id": "funnel", "title": "Sessions → PRs → merged", "unit": "",
             "series": {"Sessions": column("sessions"), "PRs": column("prs"),
                        "Merged": column("merged")}},
            {"id": "rates", "title": "Merged-PR rate and verify pass rate", "unit": "%",
             "series": {"Merged-PR rate": column("merged_rate"),
                        "Verify pass rate": column("verify_pass_rate")}},
            {"id": "review-times", "title": "Time to first review and to merge (p50)",
             "unit": " h", "series": {"First review": column("first_review_p50_s"),
                                      "Merge": column("merge_p50_s")}},
            {"id": "review", "title": "Reviewer minutes", "unit": " min",
             "series": {"Reviewer minutes": column("reviewer_minutes")}},
            {"id": "accepted", "title": "Merged PRs per reviewer hour", "unit": "",
             "series": {"Merged PRs / reviewer hour": column("merged_per_reviewer_hour")}},
            {"id": "lines", "title": "Merged lines per reviewer hour", "unit": "",
             "series": {"Merged lines / reviewer hour": column("lines_per_reviewer_hour")}},
            {"id": "rounds", "title": "Review rounds and retries", "unit": "",
             "series": {"Review rounds / merged PR": column("rounds_per_merged"),
                        "Retries / session": column("retries_per_session")}},
            {"id": "cost", "title": "Model cost per merged PR", "unit": " $",
             "series": {"Cost / merged PR": column("cost_per_merged")}},
            {"id": "spend", "title": "Model cost", "unit": " $",
             "series": {"Model cost": column("cost_usd")}},
            {"id": "sandbox", "title": "Sandbox minutes", "unit": " min",
             "series": {"Sandbox minutes": column("sandbox_minutes")}},
            {"id": "defects", "title": "Escaped defects (merged, then reverted)", "unit": "",
             "series": {"Escaped defects": column("escaped")}},
            {"id": "latency", "title": "Start latency", "unit": " ms",
             "series": {"p50": column("start_p50_ms"), "p95": column("start_p95_ms")}},
            {"id": "snapshot", "title": "Snapshot age at session start (average)",
             "unit": " min", "series": {"Snapshot age": column("snapshot_age_avg_s")}},
        ],
    }  # fmt: skip


# --------------------------------------------------------------------------- review time

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
    from django.core.cache import cache

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
    return counted


def report_display(report: MetricsReport) -> dict:
    """What the page's templates show: headline cards and table rows as formatted strings."""
    total = report.total
    by = {c.key: c for c in COLUMNS}

    def fmt(key: str, figures: Figures = total) -> str:
        return format_value(figures, by[key])

    cards = [
        {"label": "Merged-PR rate", "value": fmt("merged_rate"), "headline": True,
         "note": f"{total.merged:,} of {total.prs:,} PRs merged"},
        {"label": "Sessions → PRs → merged",
         "value": f"{total.sessions:,} → {total.prs:,} → {total.merged:,}",
         "note": f"{fmt('pr_rate')} of sessions opened a PR"},
        {"label": "Time to first review", "value": fmt("first_review_p50_s"),
         "note": f"p50; average {fmt('first_review_avg_s')}"},
        {"label": "Time to merge", "value": fmt("merge_p50_s"),
         "note": f"p50; average {fmt('merge_avg_s')}; {fmt('rounds_per_merged')} review rounds"},
        {"label": "Reviewer time", "value": f"{total.reviewer_minutes / 60:,.1f} h",
         "note": f"{total.reviews:,} code-host reviews plus time on review pages"},
        {"label": "Accepted per reviewer hour", "value": fmt("merged_per_reviewer_hour"),
         "note": f"merged PRs; {fmt('lines_per_reviewer_hour')} merged lines"},
        {"label": "Cost per merged PR", "value": fmt("cost_per_merged"),
         "note": f"model cost {fmt('cost_usd')}; {fmt('sandbox_minutes')} sandbox min"},
        {"label": "Verify pass rate", "value": fmt("verify_pass_rate"),
         "note": f"{fmt('retries_per_session')} retries per session"},
        {"label": "Escaped defects", "value": fmt("escaped"),
         "note": "merged, then reverted"
         + (f" ({total.escaped_rate * 100:.1f}% of merged)" if total.escaped_rate else "")},
        {"label": "Start latency", "value": f"{fmt('start_p50_ms')}",
         "note": f"p50; p95 {fmt('start_p95_ms')}; snapshot age {fmt('snapshot_age_avg_s')}"},
        {"label": "Humans prompting now", "value": f"{report.prompting_now:,}",
         "note": "distinct people who sent a prompt in the last 5 minutes"},
    ]  # fmt: skip
    label = "%Y-%m-%d" if report.period == "day" else "week of %Y-%m-%d"
    series = [
        (bucket.strftime(label), [format_value(f, c) for c in COLUMNS])
        for bucket, f in reversed(report.series)
    ]
    repositories = [
        (repo, report.prompting_now_by_repository.get(repo.pk, 0),
         [format_value(f, c) for c in COLUMNS])
        for repo, f in report.by_repository
    ]  # fmt: skip
    return {
        "cards": cards,
        "columns": COLUMNS,
        "series_rows": series,
        "repository_rows": repositories,
        "total_cells": [format_value(total, c) for c in COLUMNS],
        "charts": chart_data(report),
    }
