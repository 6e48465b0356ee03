"""A small, hand-made data set with times and figures worked out by hand (see each test)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from accounts.models import Membership, Role
from sessions.models import Prompt, PullRequest, ReviewEvent, Session

NOW = datetime(2026, 3, 18, 12, 0, tzinfo=UTC)
RANGE = {"start": "2026-03-02", "end": "2026-03-15"}  # two whole weeks, Monday to Sunday


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fresh_cache():
    from django.core.cache import cache

    cache.clear()  # the review timer's last-ping times
    yield


@pytest.fixture
def world(team):
    """widgets: five sessions in range (and one the day before), gadgets: one.

    The admin is also a manager on gadgets, so the admin's overall view covers both."""
    Membership.objects.create(user=team.admin, repository=team.other_repository, role=Role.MANAGER)
    n = iter(range(1, 100))

    def session(repo, created, **totals):
        return Session.objects.create(
            repository=repo, creator=team.engineer, title="t", branch=f"b{next(n)}",
            created_at=created, **totals,
        )  # fmt: skip

    def pr(s, opened, **fields):
        return PullRequest.objects.create(
            session=s, repository=s.repository, branch=s.branch, base="main", title="t",
            author=team.engineer, created_at=opened, **fields,
        )  # fmt: skip

    def review(p, kind, seconds=0, who=None):
        return ReviewEvent.objects.create(
            pull_request=p, reviewer=who or team.reviewer, kind=kind, seconds=seconds,
            created_at=p.created_at + timedelta(hours=1),
        )  # fmt: skip

    w = team.repository
    s1 = session(w, at(2, 10), cost_usd=1.0, sandbox_seconds=600, retries=0, verify_ok=True,
                 start_ms=500, snapshot_age_s=600)  # fmt: skip
    p1 = pr(s1, at(2, 11), state="merged", first_review_at=at(2, 13), merged_at=at(2, 15),
            additions=30, deletions=10, review_rounds=1, reverted_at=at(5, 9))  # fmt: skip
    review(p1, "approved")  # no timing: counts 300 s
    review(p1, "viewed", 120)
    s2 = session(w, at(3, 9), cost_usd=2.0, sandbox_seconds=1200, retries=2, verify_ok=False,
                 start_ms=1500, snapshot_age_s=1200)  # fmt: skip
    p2 = pr(s2, at(3, 10), state="merged", first_review_at=at(3, 16), merged_at=at(4, 10),
            additions=100, deletions=0, review_rounds=3)  # fmt: skip
    review(p2, "changes_requested", 600)  # a timing given: counts as given
    review(p2, "commented")
    review(p2, "approved")
    session(w, at(4, 12), cost_usd=0.5, sandbox_seconds=300, retries=1, verify_ok=None,
            start_ms=900)  # fmt: skip
    s4 = session(w, at(10, 8), cost_usd=3.0, sandbox_seconds=900, verify_ok=True, start_ms=700,
                 snapshot_age_s=300)  # fmt: skip
    pr(s4, at(10, 9), state="closed", closed_at=at(11, 9))
    s5 = session(w, at(11, 9), cost_usd=1.5, sandbox_seconds=60, verify_ok=True, start_ms=2000,
                 snapshot_age_s=900)  # fmt: skip
    p5 = pr(s5, at(11, 10), state="open", first_review_at=at(11, 11), review_rounds=1)
    review(p5, "commented")
    review(p5, "viewed", 60)
    # The day before the range: never counted.
    s0 = session(w, at(1, 23, 59), cost_usd=100.0, start_ms=99_999)
    p0 = pr(s0, at(2, 1), state="merged", merged_at=at(2, 2), additions=1000)
    review(p0, "approved", 3600)

    g = team.other_repository
    s7 = session(g, at(5, 10), cost_usd=4.0, sandbox_seconds=120, verify_ok=True, start_ms=300)
    p7 = pr(s7, at(5, 11), state="merged", first_review_at=at(5, 11, 30), merged_at=at(5, 12),
            additions=5, deletions=5, review_rounds=1)  # fmt: skip
    review(p7, "approved")

    # Prompts: the engineer twice and the reviewer once in the last five minutes, the manager
    # six minutes ago (too long ago).
    for s, author, minutes_ago, order in [
        (s5, team.engineer, 2, 1), (s5, team.engineer, 1, 2), (s4, team.reviewer, 4, 1),
        (s2, team.manager, 6, 1),
    ]:  # fmt: skip
        Prompt.objects.create(session=s, author=author, text="go", order=order,
                              created_at=NOW - timedelta(minutes=minutes_ago))  # fmt: skip
    return {"s5": s5, "p5": p5, "p1": p1, "p7": p7}
