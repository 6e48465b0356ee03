"""Every figure of the Metrics page against values worked out by hand from conftest.world."""

from __future__ import annotations

from datetime import date

import pytest

from metrics.queries import metrics_report, percentile_cont
from tests.metrics.conftest import NOW

pytestmark = pytest.mark.django_db

START, END = date(2026, 3, 2), date(2026, 3, 15)


def report_for(repositories, period="week"):
    return metrics_report(repositories=repositories, period=period, start=START, end=END, now=NOW)


def test_the_funnel_and_the_merged_pr_rate(team, world):
    total = report_for([team.repository]).total
    assert (total.sessions, total.prs, total.merged, total.closed) == (5, 4, 2, 1)
    assert total.merged_rate == pytest.approx(0.5)
    assert total.pr_rate == pytest.approx(0.8)


def test_review_times_and_rounds(team, world):
    total = report_for([team.repository]).total
    # First reviews after 2 h, 6 h and 1 h; merges after 4 h and 24 h.
    assert total.first_review_p50_s == pytest.approx(2 * 3600)
    assert total.first_review_avg_s == pytest.approx(3 * 3600)
    assert total.merge_p50_s == pytest.approx(14 * 3600)
    assert total.merge_avg_s == pytest.approx(14 * 3600)
    assert total.rounds_per_merged == pytest.approx(2.0)  # (1 + 3) / 2


def test_reviewer_effort_and_accepted_change_per_reviewer_hour(team, world):
    total = report_for([team.repository]).total
    # p1: 300 (approved, untimed) + 120 viewed; p2: 600 + 300 + 300; p5: 300 + 60.
    assert total.review_s == 1980
    assert total.reviewer_minutes == pytest.approx(33.0)
    assert total.reviews == 5
    assert total.merged_lines == 140
    assert total.merged_per_reviewer_hour == pytest.approx(2 / 0.55)
    assert total.lines_per_reviewer_hour == pytest.approx(140 / 0.55)


def test_cost_sandbox_retries_and_verification(team, world):
    total = report_for([team.repository]).total
    assert total.sandbox_minutes == pytest.approx(51.0)  # 3,060 s
    assert total.cost_usd == pytest.approx(8.0)
    assert total.cost_per_merged == pytest.approx(4.0)
    assert total.retries_per_session == pytest.approx(0.6)
    assert total.verify_pass_rate == pytest.approx(0.75)  # 3 of the 4 that verified


def test_escaped_defects_latency_and_snapshot_age(team, world):
    total = report_for([team.repository]).total
    assert total.escaped == 1
    assert total.escaped_rate == pytest.approx(0.5)
    assert total.start_p50_ms == pytest.approx(900)  # of 500, 700, 900, 1500, 2000
    assert total.start_p95_ms == pytest.approx(1900)  # 1500 + 0.8 * 500
    assert total.snapshot_age_avg_s == pytest.approx(750)  # one session had none


def test_humans_prompting_now_counts_distinct_people_of_the_last_five_minutes(team, world):
    report = report_for([team.repository])
    assert report.prompting_now == 2
    assert report.prompting_now_by_repository == {team.repository.pk: 2}


def test_figures_per_week_belong_to_the_week_the_session_started(team, world):
    series = dict(report_for([team.repository]).series)
    first, second = series[date(2026, 3, 2)], series[date(2026, 3, 9)]
    assert (first.sessions, first.prs, first.merged, first.review_s) == (3, 2, 2, 1620)
    assert (second.sessions, second.prs, second.merged, second.review_s) == (2, 2, 0, 360)
    assert second.merged_rate == 0
    assert first.start_p50_ms == pytest.approx(900)  # of 500, 1500, 900
    assert second.start_p95_ms == pytest.approx(700 + 0.95 * 1300)


def test_per_day_every_day_of_the_range_is_there_even_without_sessions(team, world):
    series = report_for([team.repository], period="day").series
    assert [d for d, _ in series][0] == START and len(series) == 14
    by_day = dict(series)
    assert by_day[date(2026, 3, 3)].sessions == 1
    assert by_day[date(2026, 3, 6)].sessions == 0
    assert by_day[date(2026, 3, 6)].merged_rate is None  # no PRs: no rate, not 0


def test_overall_adds_repositories_and_keeps_each_ones_figures(team, world):
    report = report_for([team.repository, team.other_repository])
    assert (report.total.sessions, report.total.prs, report.total.merged) == (6, 5, 3)
    assert report.total.merged_rate == pytest.approx(0.6)
    assert report.total.review_s == 1980 + 300
    # Percentiles are of the union, not averages of each repository's.
    assert report.total.start_p50_ms == pytest.approx(800)  # 300, 500, 700, 900, 1500, 2000
    figures = {repo.name: f for repo, f in report.by_repository}
    assert figures["gadgets"].merged == 1 and figures["widgets"].merged == 2
    assert figures["gadgets"].first_review_p50_s == pytest.approx(1800)


def test_no_repositories_means_no_figures_and_no_queries(django_assert_num_queries):
    with django_assert_num_queries(0):
        report = metrics_report(repositories=[], start=START, end=END)
    assert report.total.sessions == 0 and report.total.merged_rate is None


def test_percentile_cont_interpolates_like_postgresql():
    assert percentile_cont([1, 2, 3, 4], 0.5) == 2.5
    assert percentile_cont([10], 0.95) == 10
    assert percentile_cont([], 0.5) is None


@pytest.mark.parametrize("period", ["week", "day"])
def test_the_portable_computation_gives_exactly_what_the_postgresql_statement_does(
    team, world, period
):
    from datetime import UTC, datetime

    from django.db import connection

    from metrics.queries import SUM_FIELDS, _figures_portable, _figures_postgresql

    if connection.vendor != "postgresql":
        # On SQLite the other tests check the portable path against the hand-computed values.
        pytest.skip("compares with the PostgreSQL statement; needs PostgreSQL")
    args = (
        [team.repository.pk, team.other_repository.pk],
        datetime(2026, 3, 1, tzinfo=UTC),  # s0 and its PR too
        datetime(2026, 3, 16, tzinfo=UTC),
        period,
    )
    sums_sql, percentiles_sql = _figures_postgresql(*args)
    sums_orm, percentiles_python = _figures_portable(*args)

    def added(rows):
        out = {}
        for repo_id, bucket, values in rows:
            sums = out.setdefault((repo_id, bucket), dict.fromkeys(SUM_FIELDS, 0))
            for name, value in zip(SUM_FIELDS, values, strict=True):
                sums[name] += value or 0
        return out

    in_sql, in_orm = added(sums_sql), added(sums_orm)
    assert set(in_sql) == set(in_orm)
    for key, figures in in_sql.items():
        assert figures == pytest.approx(in_orm[key]), key
    s0_bucket = date(2026, 3, 1) if period == "day" else date(2026, 2, 23)
    assert in_sql[(team.repository.pk, s0_bucket)]["review_s"] == 3600
    in_sql = {(r, b): v for r, b, v in percentiles_sql}
    in_python = {(r, b): v for r, b, v in percentiles_python}
    assert set(in_sql) == set(in_python)
    for key, values in in_sql.items():
        assert values == pytest.approx(in_python[key]), key


def test_a_pr_opened_after_midnight_counts_on_the_day_its_session_started(team, world):
    # s0 started 2026-03-01 23:59; its PR p0 opened 2026-03-02 01:00 and was reviewed later.
    report = metrics_report(repositories=[team.repository], period="day",
                            start=date(2026, 3, 1), end=date(2026, 3, 2), now=NOW)  # fmt: skip
    by_day = dict(report.series)
    before, first = by_day[date(2026, 3, 1)], by_day[date(2026, 3, 2)]
    assert (before.sessions, before.prs, before.merged, before.merged_lines) == (1, 1, 1, 1000)
    assert before.review_s == 3600 and before.merge_p50_s == 3600  # opened 01:00, merged 02:00
    assert (first.sessions, first.prs, first.merged, first.review_s) == (1, 1, 1, 420)
    assert report.total.merge_p50_s == (3600 + 4 * 3600) / 2  # p0 (1 h) and p1 (4 h)
