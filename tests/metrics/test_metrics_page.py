"""The Metrics page: who sees what, the filters, the htmx partial, and a constant query count."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.metrics.conftest import RANGE

pytestmark = pytest.mark.django_db


def get(client, user, **params):
    client.force_login(user)
    return client.get(reverse("metrics"), params)


def test_a_manager_sees_the_repositorys_figures(client, team, world):
    page = get(client, team.manager, **RANGE).content.decode()
    assert "Merged-PR rate" in page
    assert "50.0%" in page  # 2 of 4 PRs merged
    assert "5 → 4 → 2" in page
    assert "/static/vendor/uplot/uPlot.iife.min.js" in page
    assert 'id="metrics-chart-data"' in page
    assert "gadgets" not in page  # the manager's only repository is widgets


def test_the_filters_are_labelled_controls(client, team, world):
    page = get(client, team.manager, **RANGE).content.decode()
    for control in ["m-repository", "m-period", "m-start", "m-end"]:
        assert f'<label for="{control}">' in page
        assert f'id="{control}"' in page
    assert 'hx-get="/metrics/"' in page


def test_the_overall_view_covers_only_repositories_the_user_may_see(client, team, world):
    page = get(client, team.admin, **RANGE).content.decode()  # manager on both
    assert "6 → 5 → 3" in page
    page = get(client, team.manager, **RANGE).content.decode()  # widgets only
    assert "5 → 4 → 2" in page


def test_an_engineer_sees_no_figures_and_is_refused_the_repository(client, team, world):
    page = get(client, team.engineer, **RANGE).content.decode()
    assert "manager or admin role" in page
    assert "Merged-PR rate" not in page
    response = get(client, team.engineer, repository="widgets", **RANGE)
    assert response.status_code == 403
    assert b"widgets" in response.content and b"manager role" in response.content


def test_a_non_member_gets_404_for_a_repository_and_nothing_of_it_overall(client, team, world):
    assert get(client, team.outsider, repository="widgets").status_code == 404
    assert get(client, team.outsider, repository="no-such-repo").status_code == 404
    page = get(client, team.outsider, **RANGE).content.decode()
    assert "widgets" not in page
    assert "1 → 1 → 1" in page  # gadgets' own session, PR and merge


def test_one_repository_of_several(client, team, world):
    page = get(client, team.admin, repository="gadgets", **RANGE).content.decode()
    assert "1 → 1 → 1" in page and "100.0%" in page


def test_an_htmx_request_gets_the_figures_only(client, team, world):
    client.force_login(team.manager)
    response = client.get(reverse("metrics"), {**RANGE, "period": "day"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and "Per day, newest first" in body
    assert "2026-03-15" in body and "2026-03-02" in body


def test_a_bad_range_is_explained(client, team, world):
    response = get(client, team.manager, start="2026-03-15", end="2026-03-01")
    assert response.status_code == 400
    assert b"starts (2026-03-15) after it ends (2026-03-01)" in response.content
    response = get(client, team.manager, start="March")
    assert response.status_code == 400 and b"2026-01-31" in response.content
    assert get(client, team.manager, period="year").status_code == 400


def test_the_page_needs_a_login(client):
    response = client.get(reverse("metrics"))
    assert response.status_code == 302


def test_the_page_runs_as_many_queries_for_ten_times_the_data(client, team):
    from accounts.models import Membership, Role
    from metrics.seed import seed_metrics_data
    from snapshots.models import Repository

    def queries_for(prefix: str, sessions: int, repositories: int) -> tuple[int, str]:
        seed_metrics_data(sessions=sessions, events=sessions * 5, prs=sessions // 2,
                          repositories=repositories, users=20, prefix=prefix)  # fmt: skip
        for repo in Repository.objects.filter(name__startswith=f"{prefix}-"):
            Membership.objects.update_or_create(
                user=team.admin, repository=repo, defaults={"role": Role.MANAGER}
            )
        client.force_login(team.admin)
        with CaptureQueriesContext(connection) as captured:
            response = client.get(reverse("metrics"), {"period": "day"})
        assert response.status_code == 200
        return len(captured.captured_queries), response.content.decode()

    small, small_page = queries_for("small", 60, 3)
    large, large_page = queries_for("large", 600, 12)  # 10x the sessions, 4x the repositories
    assert small == large
    assert "small-repo-0" in large_page  # the second count covered both data sets


def test_every_figure_of_the_issue_is_charted_over_time_and_tabled(client, team, world):
    import json
    import re

    page = get(client, team.manager, **RANGE).content.decode()
    found = re.search(r'id="metrics-chart-data" type="application/json">(.*?)</script>', page)
    charts = json.loads(found.group(1))
    assert len(charts["x"]) == 2  # two weeks
    charted = {name for chart in charts["charts"] for name in chart["series"]}
    for figure in ["Sessions", "PRs", "Merged", "Merged-PR rate", "First review", "Merge",
                   "Review rounds / merged PR", "Reviewer minutes", "Merged PRs / reviewer hour",
                   "Merged lines / reviewer hour", "Sandbox minutes", "Model cost",
                   "Cost / merged PR", "Retries / session", "Verify pass rate",
                   "Escaped defects", "p50", "p95", "Snapshot age"]:  # fmt: skip
        assert figure in charted, figure
    funnel = next(c for c in charts["charts"] if c["id"] == "funnel")
    assert funnel["series"]["Merged"] == [2, 0]
    for header in ["Merged-PR rate", "First review p50", "Merge p50", "Review rounds",
                   "Reviewer min", "Merged / rev. hour", "Lines / rev. hour", "Sandbox min",
                   "Model cost", "Cost / merged PR", "Retries / session", "Verify pass",
                   "Escaped defects", "Start p50", "Start p95", "Snapshot age",
                   "Prompting now"]:  # fmt: skip
        assert f'<th scope="col">{header}</th>' in page, header
    assert "Humans prompting now" in page
