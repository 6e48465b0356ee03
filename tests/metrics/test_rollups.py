"""The Metrics page's rollups (metrics/rollups.py, metrics/rollup_read.py) against the
reference computation over the sessions (metrics/queries.py), on seeded data and after changes
made through the code paths that make them in production."""

from __future__ import annotations

import json
import math
import random
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from metrics import sketch
from metrics.figures import Figures
from metrics.models import AuthorDailyRollup, DailyRollup, RollupMark
from metrics.queries import PERCENTILES, SUM_FIELDS, metrics_report, percentile_cont
from metrics.review_time import review_time_record
from metrics.rollup_read import current_metrics_report, rollup_figures
from metrics.rollups import rebuild_rollups, refresh_marked
from metrics.seed import seed_metrics_data
from sessions import pulls
from sessions.models import PullRequest, ReviewEvent, Session
from sessions.totals import totals_changed
from snapshots.models import Repository

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)
TODAY = NOW.date()
FLOATS = {"first_review_s", "merge_s", "cost_usd", "sandbox_s", "snapshot_s"}


@pytest.fixture
def seeded():
    seed_metrics_data(sessions=3000, events=3000, prs=1600, repositories=5, users=40, days=120,
                      seed=11, prefix="roll", now=NOW)  # fmt: skip
    rebuild_rollups()
    return list(Repository.objects.filter(name__startswith="roll-repo-").order_by("name"))


def reports(repositories, period, start, end):
    args = {"repositories": repositories, "period": period, "start": start, "end": end, "now": NOW}
    return metrics_report(**args), metrics_report(**args, figures_of=rollup_figures)


def assert_same_figures(reference: Figures, rolled: Figures, where: str) -> None:
    for name in SUM_FIELDS:
        want, got = getattr(reference, name), getattr(rolled, name)
        if name in FLOATS:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9), (where, name)
        else:
            assert got == want, (where, name)
    for name in PERCENTILES:
        want, got = getattr(reference, name), getattr(rolled, name)
        if want is None:
            assert got is None, (where, name)
        else:
            # Within the sketch's relative accuracy (exact for small sets).
            assert got == pytest.approx(want, rel=sketch.RELATIVE_ACCURACY * 1.0001), (where, name)


def assert_same_reports(repositories, period, start, end) -> None:
    reference, rolled = reports(repositories, period, start, end)
    assert_same_figures(reference.total, rolled.total, "total")
    assert [b for b, _ in reference.series] == [b for b, _ in rolled.series]
    for (bucket, want), (_, got) in zip(reference.series, rolled.series, strict=True):
        assert_same_figures(want, got, f"period {bucket}")
    for (repo, want), (_, got) in zip(reference.by_repository, rolled.by_repository, strict=True):
        assert_same_figures(want, got, f"repository {repo.name}")
    assert reference.total.sessions > 0


@pytest.mark.parametrize("period", ["week", "day"])
def test_rollups_give_the_reference_figures_over_the_seeded_data(seeded, period):
    assert DailyRollup.objects.count() > 0 and not RollupMark.objects.exists()
    assert_same_reports(seeded, period, TODAY - timedelta(days=89), TODAY)  # the default range
    assert_same_reports(seeded, period, TODAY - timedelta(days=179), TODAY)
    assert_same_reports(seeded[:1], period, TODAY - timedelta(days=40), TODAY - timedelta(days=3))


def test_small_sets_are_exact_and_large_ones_within_the_sketch_accuracy(seeded, monkeypatch):
    start = TODAY - timedelta(days=89)
    reference, exact = reports(seeded, "week", start, TODAY)
    assert reference.total.sessions <= sketch.MERGED_EXACT_MAX
    assert exact.total.start_p95_ms == reference.total.start_p95_ms
    # Past MERGED_EXACT_MAX values a merge reads its sketch: close, not equal.
    monkeypatch.setattr(sketch, "MERGED_EXACT_MAX", 100)
    _, sketched = reports(seeded, "week", start, TODAY)
    assert sketched.total.start_p95_ms != reference.total.start_p95_ms
    assert sketched.total.start_p95_ms == pytest.approx(
        reference.total.start_p95_ms, rel=sketch.RELATIVE_ACCURACY
    )
    assert_same_reports(seeded, "day", start, TODAY)


def rollup_rows() -> dict:
    fields = [f.name for f in DailyRollup._meta.fields if f.name != "id"]
    rows = {}
    for row in DailyRollup.objects.values(*fields):
        key = (row.pop("repository"), row.pop("day"))
        rows[key] = {k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}
    return rows


def assert_same_rollups(got: dict, want: dict) -> None:
    # Float sums may differ in the last bit: the database adds in the order its plan reads.
    assert got.keys() == want.keys()
    for key, row in want.items():
        for field, value in row.items():
            if isinstance(value, float):
                assert got[key][field] == pytest.approx(value, rel=1e-12), (key, field)
            else:
                assert got[key][field] == value, (key, field)


def test_changes_through_the_real_code_paths_keep_the_rollups_equal_to_a_rebuild(seeded):
    rng = random.Random(3)
    prs = list(PullRequest.objects.filter(repository__in=seeded).select_related("session"))
    open_pr = next(pr for pr in prs if pr.state == PullRequest.State.OPEN)
    old_pr = min(prs, key=lambda pr: pr.session.created_at)  # a late webhook: an old session
    reviewer = get_user_model().objects.filter(username__startswith="roll-user-").last()
    # A review from the code host, then its replay (same delivery): counted once.
    for _ in range(2):
        pulls.record_review(old_pr, kind=ReviewEvent.Kind.APPROVED, external_id="gh-review-1",
                            login="octo", at=NOW)  # fmt: skip
    pulls.mark_merged(open_pr, merge_sha="abc", at=NOW)
    pulls.mark_merged(open_pr, merge_sha="abc", at=NOW)  # a replayed merged webhook
    # Review-page pings: the first creates today's `viewed` row, the next adds to it.
    review_time_record(user=reviewer, pull_request=old_pr, seconds=30, now=NOW)
    review_time_record(
        user=reviewer, pull_request=old_pr, seconds=40, now=NOW + timedelta(seconds=45)
    )
    # Session totals written by UPDATE (as the runner and the gateway's metering do).
    touched = rng.sample(list(Session.objects.filter(repository__in=seeded)), 5)
    for session in touched:
        Session.objects.filter(pk=session.pk).update(cost_usd=session.cost_usd + 1.25, start_ms=42)
    totals_changed([s.pk for s in touched])
    # A new session (post_save) and a deleted PR (post_delete).
    Session.objects.create(
        repository=seeded[0], creator=reviewer, title="new", branch="b-new",
        created_at=NOW - timedelta(hours=1), cost_usd=3.0, start_ms=900,
    )  # fmt: skip
    PullRequest.objects.filter(pk=rng.choice(prs).pk).delete()
    assert RollupMark.objects.exists()

    assert refresh_marked() > 0
    assert not RollupMark.objects.exists()
    assert_same_reports(seeded, "week", TODAY - timedelta(days=179), TODAY)
    incremental = rollup_rows()
    assert refresh_marked() == 0  # nothing marked: nothing recomputed
    rebuild_rollups()
    assert_same_rollups(rollup_rows(), incremental)


def test_replaying_an_update_does_not_count_twice(seeded):
    pr = PullRequest.objects.filter(repository__in=seeded, state=PullRequest.State.MERGED).first()
    start = TODAY - timedelta(days=179)
    before = reports(seeded, "week", start, TODAY)[1].total
    pulls.record_review(pr, kind=ReviewEvent.Kind.COMMENTED, external_id="gh-9", login="o", at=NOW)
    refresh_marked()
    once = reports(seeded, "week", start, TODAY)[1].total
    assert (once.reviews, once.review_s) == (before.reviews + 1, before.review_s + 300)
    # The same webhook delivered again, the marks of both replayed, the refresh run twice.
    assert not pulls.record_review(pr, kind=ReviewEvent.Kind.COMMENTED, external_id="gh-9",
                                   login="o", at=NOW)  # fmt: skip
    totals_changed([pr.session_id])
    totals_changed([pr.session_id])
    refresh_marked()
    refresh_marked()
    again = reports(seeded, "week", start, TODAY)[1].total
    assert (again.reviews, again.review_s, again.merged) == (
        once.reviews,
        once.review_s,
        once.merged,
    )


def test_the_page_reads_marked_changes_at_once(seeded, team):
    session = Session.objects.filter(repository=seeded[0]).order_by("-created_at").first()
    Session.objects.filter(pk=session.pk).update(cost_usd=session.cost_usd + 100)
    totals_changed([session.pk])
    report = current_metrics_report(repositories=seeded, start=TODAY - timedelta(days=89),
                                    end=TODAY, now=NOW)  # fmt: skip
    reference = metrics_report(repositories=seeded, start=TODAY - timedelta(days=89), end=TODAY,
                               now=NOW)  # fmt: skip
    assert report.total.cost_usd == pytest.approx(reference.total.cost_usd, rel=1e-9)


def test_author_rollups_add_up_to_the_repository_rollups(seeded):
    for repo in seeded:
        authors = AuthorDailyRollup.objects.filter(repository=repo)
        days = DailyRollup.objects.filter(repository=repo)
        assert sum(a.sessions for a in authors) == sum(d.sessions for d in days)
        assert sum(a.merged for a in authors) == sum(d.merged for d in days)
        assert sum(a.merged_lines for a in authors) == sum(d.merged_lines for d in days)


def test_a_sketch_is_within_its_accuracy_and_merges_like_the_union():
    rng = random.Random(5)
    parts = [[rng.lognormvariate(math.log(650), 0.8) for _ in range(3000)] for _ in range(4)]
    parts.append([0.0, -5.0, 1e12])  # zero, a negative value, one beyond MAX_VALUE
    merged = sketch.Merged()
    for values in parts:
        first, counts = sketch.encode(values)
        merged.add(sketch.Stored(first, counts, len(values), sketch.encode_exact(values)))
    union = sorted(v for values in parts for v in values)
    assert merged.exact is None  # too many to keep
    for q in (0.01, 0.5, 0.95, 0.999):
        (got,) = merged.percentiles([q])
        assert got == pytest.approx(percentile_cont(union, q), rel=sketch.RELATIVE_ACCURACY)
    small = sketch.Merged()
    values = [3.0, 1.0, 2.0, 10.0]
    small.add(sketch.Stored(*sketch.encode(values), len(values), sketch.encode_exact(values)))
    assert small.percentiles([0.5, 0.95]) == [2.5, percentile_cont(sorted(values), 0.95)]
    assert sketch.Merged().percentiles([0.5]) == [None]


def test_a_grouped_merge_gives_what_merging_each_group_on_its_own_gives():
    # The page adds each stored sketch to its period's and its repository's merge as it reads
    # the rows (GroupedMerge); each group must read as Merged.add of its own sketches, exact
    # while every one kept its values and the group holds at most MERGED_EXACT_MAX of them.
    rng = random.Random(9)
    sizes = {"kept": [3, 40, 64], "one not kept": [64, 65], "big": [500, 2, 900],
             "too many kept": [60] * 70}  # fmt: skip
    parts = [
        (group, [rng.lognormvariate(math.log(650), 0.8) for _ in range(n)])
        for group, ns in sizes.items()
        for n in ns
    ]
    encoded = [(group, sketch.encode(values), values) for group, values in parts]
    grouped = sketch.GroupedMerge(min(first for _, (first, _), _ in encoded))
    alone: dict[str, sketch.Merged] = {}
    for group, (first, counts), values in encoded:
        exact = sketch.encode_exact(values)
        grouped.add((group, "all"), first, counts, len(values), exact)
        for key in (group, "all"):
            alone.setdefault(key, sketch.Merged()).add(
                sketch.Stored(first, counts, len(values), exact)
            )
    merged = grouped.merged()
    assert merged.keys() == alone.keys()
    for key, want in alone.items():
        got, fractions = merged[key], [0.01, 0.5, 0.95, 0.999]
        assert got.count == want.count, key
        assert (got.exact is None) == (want.exact is None), key
        assert got.percentiles(fractions) == want.percentiles(fractions), key
    assert merged["kept"].exact is not None and merged["one not kept"].exact is None
    assert merged["too many kept"].exact is None and merged["all"].exact is None


def test_the_seed_computes_its_rollups_and_the_command_rebuilds_them(inspect_cli):
    code, _, err = inspect_cli(
        "metrics", "seed", "--sessions", "300", "--events", "900", "--prs", "120",
        "--repositories", "3", "--prefix", "cmd",
    )  # fmt: skip
    assert code == 0, err
    repositories = list(Repository.objects.filter(name__startswith="cmd-repo-"))
    today = datetime.now(UTC).date()
    assert_same_reports(repositories, "week", today - timedelta(days=179), today)
    seeded = rollup_rows()
    code, out, err = inspect_cli("metrics", "rollups", "--rebuild", "--json")
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["rollups"] == len(seeded)
    assert_same_rollups(rollup_rows(), seeded)
    code, out, _ = inspect_cli("metrics", "rollups")
    assert code == 0 and "recomputed the days of 0 marks" in out


def test_a_real_worker_refreshes_what_a_change_marked(team, celery_worker_process):
    # A session saved (post_save): its day is marked, and once the transaction commits the
    # refresh task is queued; a real worker recomputes the day.
    session = Session.objects.create(repository=team.repository, creator=team.engineer,
                                     title="t", branch="b", cost_usd=2.5, start_ms=700)  # fmt: skip
    day = session.created_at.astimezone(UTC).date()
    deadline = time.monotonic() + 60
    while RollupMark.objects.exists():
        assert time.monotonic() < deadline, "the worker did not refresh the marked day"
        time.sleep(0.2)
    rollup = DailyRollup.objects.get(repository=team.repository, day=day)
    assert (rollup.sessions, rollup.cost_usd, rollup.start_n) == (1, 2.5, 1)
