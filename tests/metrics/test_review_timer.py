"""Time on a PR's review page counts as reviewer effort, measured and capped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from metrics.review_time import REVIEW_PING_CAP, review_time_record
from sessions.models import ReviewEvent
from tests.metrics.conftest import NOW

pytestmark = pytest.mark.django_db


def viewed(pr, user):
    return list(ReviewEvent.objects.filter(pull_request=pr, reviewer=user, kind="viewed"))


def test_a_ping_from_the_review_panel_records_the_reviewers_time(client, team, world):
    pr = world["p5"]
    client.force_login(team.manager)
    response = client.post(reverse("metrics-review-time", args=[pr.pk]), {"seconds": "30"})
    assert response.status_code == 204
    [row] = viewed(pr, team.manager)
    assert row.seconds == 30 and row.reviewer_login == "manager"


def test_a_second_ping_at_once_adds_nothing(client, team, world):
    pr = world["p5"]
    client.force_login(team.manager)
    url = reverse("metrics-review-time", args=[pr.pk])
    client.post(url, {"seconds": "30"})
    client.post(url, {"seconds": "30"})
    assert sum(r.seconds for r in viewed(pr, team.manager)) == 30


def test_pings_over_time_add_up_in_one_row_per_day(team, world):
    pr = world["p5"]
    for k in range(4):
        review_time_record(user=team.reviewer, pull_request=pr, seconds=30,
                           now=NOW + timedelta(seconds=30 * k))  # fmt: skip
    review_time_record(user=team.reviewer, pull_request=pr, seconds=30, now=NOW + timedelta(days=1))
    rows = sorted(viewed(pr, team.reviewer), key=lambda r: r.created_at)
    before = 60  # the fixture's own viewed event on p5, from an earlier day
    assert [r.seconds for r in rows] == [before, 120, 30]


def test_one_ping_adds_at_most_the_cap(team, world):
    counted = review_time_record(
        user=team.reviewer, pull_request=world["p1"], seconds=3600, now=NOW
    )
    assert counted == REVIEW_PING_CAP


def test_the_author_reading_their_own_pr_is_not_review(client, team, world):
    pr = world["p5"]  # authored by the engineer
    client.force_login(team.engineer)
    assert client.post(reverse("metrics-review-time", args=[pr.pk])).status_code == 204
    assert viewed(pr, team.engineer) == []


def test_a_non_member_gets_404_and_nothing_is_recorded(client, team, world):
    pr = world["p5"]
    client.force_login(team.outsider)
    assert client.post(reverse("metrics-review-time", args=[pr.pk])).status_code == 404
    assert viewed(pr, team.outsider) == []


def test_the_recorder_only_takes_posts_with_a_number(client, team, world):
    url = reverse("metrics-review-time", args=[world["p5"].pk])
    client.force_login(team.manager)
    assert client.get(url).status_code == 405
    assert client.post(url, {"seconds": "lots"}).status_code == 400


def test_recorded_time_shows_up_as_reviewer_minutes(client, team, world):
    from tests.metrics.conftest import RANGE

    client.force_login(team.manager)
    client.post(reverse("metrics-review-time", args=[world["p5"].pk]), {"seconds": "60"})
    rows = client.get(reverse("metrics"), {**RANGE, "format": "csv"}).content.decode()
    assert "total,week,widgets" in rows
    total = rows.strip().splitlines()[-1].split(",")
    header = rows.splitlines()[0].split(",")
    assert total[header.index("reviewer_minutes")] == "34"  # 33 + the minute just recorded


def test_the_panel_snippet_pings_every_30_seconds_while_visible(team, world):
    from django.template.loader import render_to_string

    html = render_to_string("sessions/panels/review_timer.html", {"pull_request": world["p5"]})
    assert f'hx-post="/metrics/review-time/{world["p5"].pk}/"' in html
    assert "every 30s [document.visibilityState === 'visible']" in html
    assert render_to_string("sessions/panels/review_timer.html", {}).strip() == ""
