"""The Metrics page counts CI-fix turns and those that ended green, the same from the rollups as
from the reference computation, and once however often the CI results are delivered again."""

from __future__ import annotations

import pytest
from django.utils import timezone

from metrics.queries import metrics_report
from metrics.rollup_read import rollup_figures
from metrics.rollups import refresh_marked
from sessions.ci_fixes import ReportedCheck, record_check
from sessions.models import CIFix, Prompt, PullRequest, Session

pytestmark = pytest.mark.django_db

OLD, NEW, NEWER = "a" * 40, "b" * 40, "c" * 40


def check(key: str, commit: str, conclusion: str, name: str = "ci/build") -> ReportedCheck:
    return ReportedCheck(
        key=key, source="status", name=name, commit=commit, status="completed",
        conclusion=conclusion, summary="2 tests failed",
    )  # fmt: skip


def pull_request(team, title: str) -> PullRequest:
    session = Session.objects.create(repository=team.repository, creator=team.engineer,
                                     title=title, state="pr_open")  # fmt: skip
    Prompt.objects.create(session=session, author=team.engineer, text=title, order=1, state="done")
    return PullRequest.objects.create(session=session, repository=team.repository, branch=title,
                                      base="main", title=title, author=team.engineer,
                                      head_sha=OLD)  # fmt: skip


def fix_turn_ran(pr: PullRequest, head: str) -> None:
    Prompt.objects.filter(session=pr.session, origin="ci_fix").update(state="done")
    PullRequest.objects.filter(pk=pr.pk).update(head_sha=head)
    pr.refresh_from_db()


def test_ci_fix_turns_and_green_ones_are_counted_once(team):
    green, red = pull_request(team, "green"), pull_request(team, "red")
    for pr in (green, red):
        record_check(pr, check(f"{pr.pk}-old", OLD, "failure"))
        fix_turn_ran(pr, NEW)
    for _ in range(3):  # the same results delivered again and again
        record_check(green, check(f"{green.pk}-new", NEW, "success"))
        record_check(green, check(f"{green.pk}-old", OLD, "failure"))
    record_check(red, check(f"{red.pk}-new", NEW, "failure"))  # second attempt queued
    fix_turn_ran(red, NEWER)
    record_check(red, check(f"{red.pk}-newer", NEWER, "failure"))  # the limit (2) is reached
    fixes = CIFix.objects.filter(pull_request=red).order_by("pk")
    assert list(fixes.values_list("state", "outcome")) == [
        ("queued", "red"), ("queued", "red"), ("limit", ""),
    ]  # fmt: skip

    refresh_marked()
    today = timezone.now().date()
    args = {"repositories": [team.repository], "period": "day", "start": today, "end": today,
            "now": timezone.now()}  # fmt: skip
    reference = metrics_report(**args)
    rolled = metrics_report(**args, figures_of=rollup_figures)
    for report in (reference, rolled):
        assert (report.total.ci_fixes, report.total.ci_fixes_green) == (3, 1)
        assert report.total.ci_fix_green_rate == pytest.approx(1 / 3)


def test_the_metrics_page_shows_ci_fix_turns(team, client):
    pr = pull_request(team, "green")
    record_check(pr, check("old", OLD, "failure"))
    fix_turn_ran(pr, NEW)
    record_check(pr, check("new", NEW, "success"))
    client.force_login(team.manager)
    page = client.get("/metrics/", {"repository": "widgets"}).content.decode()
    assert "CI-fix turns" in page and "1 ended green (100.0%)" in page
