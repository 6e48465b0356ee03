"""How the Metrics page shows a report: its columns and their units, the formatted cards and
tables, the CSV rows and the charts' series."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from html import escape

from django.utils.safestring import SafeString, mark_safe

from metrics.figures import Figures, MetricsReport


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
    Column("review_cost_usd", "Review agent cost", "usd", "review_agent_cost_usd"),
    Column("sandbox_cost_usd", "Sandbox cost", "usd", "sandbox_cost_usd"),
    Column("cost_per_merged", "Cost / merged PR", "usd", "cost_per_merged_pr_usd"),
    Column("retries_per_session", "Retries / session", "ratio", "retries_per_session"),
    Column("verify_pass_rate", "Verify pass", "pct", "verify_pass_rate"),
    Column("ci_fixes", "CI-fix turns", "count", "ci_fix_turns"),
    Column("ci_fix_green_rate", "CI fixes green", "pct", "ci_fix_green_rate"),
    Column("escaped", "Escaped defects", "count", "escaped_defects"),
    Column("start_p50_ms", "Start p50", "ms", "start_latency_p50_ms"),
    Column("start_p95_ms", "Start p95", "ms", "start_latency_p95_ms"),
    Column("snapshot_age_avg_s", "Snapshot age", "minutes_s", "snapshot_age_avg_minutes"),
]  # fmt: skip


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


def _cells(figures: Figures) -> SafeString:
    """A table row's figure cells as escaped HTML: 180 days x 24 columns through the template
    language's loop cost more than the whole report."""
    return mark_safe(  # noqa: S308 - every cell is escaped here
        "".join(f"<td>{escape(format_value(figures, c))}</td>" for c in COLUMNS)
    )


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
         "note": f"model cost {fmt('cost_usd')} + review agent {fmt('review_cost_usd')} "
                 f"+ sandbox {fmt('sandbox_cost_usd')} "
                 f"({fmt('sandbox_minutes')} min)"},
        {"label": "Verify pass rate", "value": fmt("verify_pass_rate"),
         "note": f"{fmt('retries_per_session')} retries per session"},
        {"label": "CI-fix turns", "value": fmt("ci_fixes"),
         "note": f"{total.ci_fixes_green:,} ended green"
         + (f" ({fmt('ci_fix_green_rate')})" if total.ci_fixes else "")},
        {"label": "Escaped defects", "value": fmt("escaped"),
         "note": "merged, then reverted"
         + (f" ({total.escaped_rate * 100:.1f}% of merged)" if total.escaped_rate else "")},
        {"label": "Start latency", "value": f"{fmt('start_p50_ms')}",
         "note": f"p50; p95 {fmt('start_p95_ms')}; snapshot age {fmt('snapshot_age_avg_s')}"},
        {"label": "Humans prompting now", "value": f"{report.prompting_now:,}",
         "note": "distinct people who sent a prompt in the last 5 minutes"},
    ]  # fmt: skip
    label = "%Y-%m-%d" if report.period == "day" else "week of %Y-%m-%d"
    series = [(bucket.strftime(label), _cells(f)) for bucket, f in reversed(report.series)]
    repositories = [
        (repo, report.prompting_now_by_repository.get(repo.pk, 0), _cells(f))
        for repo, f in report.by_repository
    ]
    return {
        "cards": cards,
        "columns": COLUMNS,
        "series_rows": series,
        "repository_rows": repositories,
        "total_cells": _cells(total),
        "charts": chart_data(report),
    }
