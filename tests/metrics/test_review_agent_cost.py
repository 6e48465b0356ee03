"""A review session's model cost counts as review agent cost, not as work cost: on the live
figures, the rollups and the page alike, and recomputing changes nothing."""

from datetime import UTC, datetime, timedelta

import pytest

from metrics.models import AuthorDailyRollup, DailyRollup
from metrics.queries import metrics_report
from metrics.rollup_read import rollup_figures
from metrics.rollups import rebuild_rollups
from sessions.models import Session

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)


def test_review_sessions_cost_is_review_cost(team, client):
    at = NOW - timedelta(hours=2)
    common = {"repository": team.repository, "branch": "main", "created_at": at}
    Session.objects.create(creator=team.engineer, title="work", cost_usd=3.0, **common)
    Session.objects.create(creator=team.reviewer, title="review", cost_usd=0.5,
                           purpose="review", **common)  # fmt: skip
    args = {"repositories": [team.repository], "period": "day", "start": at.date(),
            "end": at.date(), "now": NOW}  # fmt: skip
    live = metrics_report(**args).total
    assert (live.cost_usd, live.review_cost_usd) == (pytest.approx(3.0), pytest.approx(0.5))
    assert live.total_cost_usd >= 3.5
    for _ in range(2):  # recomputed: the same figures, not twice the cost
        rebuild_rollups()
        rolled = metrics_report(**args, figures_of=rollup_figures).total
        assert (rolled.cost_usd, rolled.review_cost_usd) == (live.cost_usd, live.review_cost_usd)
    day = DailyRollup.objects.get(repository=team.repository)
    assert (day.cost_usd, day.review_cost_usd) == (3.0, 0.5)
    # Per author, the work cost: the reviewer who asked for the review is charged no work.
    by_author = dict(AuthorDailyRollup.objects.values_list("author__username", "cost_usd"))
    assert by_author == {"engineer": 3.0, "reviewer": 0.0}
