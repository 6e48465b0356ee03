"""Each metered request's cost reaches the Metrics page's rollups: the metering's UPDATE of the
session's cost marks the session's day (sessions.totals), and the refresh recomputes it."""

from __future__ import annotations

from datetime import UTC

import pytest

from gateway.metering import record
from metrics.models import DailyRollup, RollupMark
from metrics.rollups import rebuild_rollups, refresh_marked
from sessions.models import Session

pytestmark = pytest.mark.django_db


def test_a_metered_request_marks_its_sessions_day_and_the_refresh_adds_its_cost(
    anthropic_exchange, access
):
    rebuild_rollups()
    session = Session.objects.get(pk=access.session_id)
    day = session.created_at.astimezone(UTC).date()
    before = DailyRollup.objects.get(repository_id=session.repository_id, day=day).cost_usd
    RollupMark.objects.all().delete()

    row = record(anthropic_exchange())
    assert row.cost_usd > 0
    assert RollupMark.objects.filter(repository_id=session.repository_id, day=day).exists()
    assert refresh_marked() > 0
    rollup = DailyRollup.objects.get(repository_id=session.repository_id, day=day)
    assert rollup.cost_usd == pytest.approx(before + row.cost_usd)
    session.refresh_from_db()
    assert rollup.cost_usd == pytest.approx(session.cost_usd)
