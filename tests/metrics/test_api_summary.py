"""The API's metrics summary: the same few queries however many repositories it covers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from api.metrics import metrics_summary

pytestmark = pytest.mark.django_db


def test_the_summary_counts_each_repository_in_a_fixed_number_of_queries(team, world):
    with CaptureQueriesContext(connection) as one:
        [widgets] = metrics_summary(user=team.manager)
    with CaptureQueriesContext(connection) as two:
        rows = metrics_summary(user=team.admin)  # manager on widgets and gadgets
    assert len(one.captured_queries) == len(two.captured_queries) == 3
    assert [r["repository"] for r in rows] == ["gadgets", "widgets"]
    assert widgets["sessions"] == 6 and widgets["prompts"] == 4  # s0 to s5; four prompts
    assert widgets["by_state"] == {"queued": 6}
    assert rows[0]["sessions"] == 1 and rows[0]["prompts"] == 0


def test_a_repository_the_user_may_not_see_gives_no_rows(team, world):
    assert metrics_summary(user=team.engineer) == []
    assert metrics_summary(user=team.manager, repository="gadgets") == []
