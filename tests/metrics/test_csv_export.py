"""?format=csv: the page's figures as a spreadsheet, one row per period and per repository."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from tests.metrics.conftest import RANGE

pytestmark = pytest.mark.django_db


def rows_of(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_csv_has_a_row_per_week_and_the_repositorys_total(client, team, world):
    client.force_login(team.manager)
    response = client.get(reverse("metrics"), {**RANGE, "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    disposition = response["Content-Disposition"]
    assert 'filename="metrics-widgets-week-2026-03-02-2026-03-15.csv"' in disposition
    rows = rows_of(response)
    assert [(r["period_start"], r["repository"]) for r in rows] == [
        ("2026-03-02", "widgets"), ("2026-03-09", "widgets"), ("total", "widgets"),
    ]  # fmt: skip
    first, _, total = rows
    assert (first["sessions"], first["prs"], first["merged_prs"]) == ("3", "2", "2")
    assert first["merged_pr_rate"] == "100"
    assert total["merged_pr_rate"] == "50"
    assert total["reviewer_minutes"] == "33"
    assert total["model_cost_usd"] == "8"
    assert total["first_review_p50_hours"] == "2"
    assert total["time_to_merge_p50_hours"] == "14"
    assert total["start_latency_p95_ms"] == "1900"
    assert total["escaped_defects"] == "1"
    assert total["verify_pass_rate"] == "75"


def test_a_figure_without_a_denominator_is_empty_not_zero(client, team, world):
    client.force_login(team.manager)
    response = client.get(reverse("metrics"), {**RANGE, "format": "csv", "period": "day"})
    by_day = {r["period_start"]: r for r in rows_of(response)}
    assert by_day["2026-03-06"]["sessions"] == "0"
    assert by_day["2026-03-06"]["merged_pr_rate"] == ""


def test_the_overall_csv_ends_with_each_repository_and_everything(client, team, world):
    client.force_login(team.admin)
    rows = rows_of(client.get(reverse("metrics"), {**RANGE, "format": "csv"}))
    totals = {r["repository"]: r for r in rows if r["period_start"] == "total"}
    assert set(totals) == {"widgets", "gadgets", "all"}
    assert totals["all"]["sessions"] == "6" and totals["gadgets"]["merged_prs"] == "1"


def test_the_csv_of_a_repository_follows_the_same_access_rules(client, team, world):
    client.force_login(team.outsider)
    params = {**RANGE, "format": "csv", "repository": "widgets"}
    assert client.get(reverse("metrics"), params).status_code == 404
    client.force_login(team.engineer)
    assert client.get(reverse("metrics"), params).status_code == 403
