"""The figures of the Metrics page: what one period, one repository or the whole range adds up
to (`Figures`), and the report that holds them (`MetricsReport`).

Counts and sums are stored and rates and averages derived from them, so that figures roll up
exactly from (repository, period) rows to periods, repositories and the total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from django.conf import settings

from snapshots.models import Repository

Period = Literal["day", "week"]
PERIODS: tuple[Period, ...] = ("day", "week")


@dataclass
class Figures:
    """The figures of one period, one repository, or everything. Counts and sums are stored;
    rates and averages are derived, so that figures add up (`add`)."""

    sessions: int = 0
    prs: int = 0
    merged: int = 0
    closed: int = 0
    merged_lines: int = 0
    escaped: int = 0
    merged_rounds: int = 0
    reviewed: int = 0
    first_review_s: float = 0.0
    merge_s: float = 0.0
    review_s: int = 0
    reviews: int = 0
    cost_usd: float = 0.0  # the model cost of work sessions
    review_cost_usd: float = 0.0  # the model cost of review sessions (the review agent)
    sandbox_s: float = 0.0
    retries: int = 0
    verify_ok: int = 0
    verify_n: int = 0
    snapshot_n: int = 0
    snapshot_s: float = 0.0
    ci_fixes: int = 0  # fix turns queued after a failed CI check (sessions/ci_fixes.py)
    ci_fixes_green: int = 0  # of which the check then passed
    # From the percentile query (not additive).
    start_p50_ms: float | None = None
    start_p95_ms: float | None = None
    first_review_p50_s: float | None = None
    merge_p50_s: float | None = None

    _ADDITIVE = (
        ["sessions", "prs", "merged", "closed", "merged_lines", "escaped", "merged_rounds"]
        + ["reviewed", "first_review_s", "merge_s", "review_s", "reviews", "cost_usd"]
        + ["sandbox_s", "retries", "verify_ok", "verify_n", "snapshot_n", "snapshot_s"]
        + ["ci_fixes", "ci_fixes_green", "review_cost_usd"]
    )

    def add(self, other: Figures) -> None:
        for name in self._ADDITIVE:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    # Derived figures; None where the denominator is zero (shown as "–", empty in CSV).
    @property
    def pr_rate(self) -> float | None:
        return _ratio(self.prs, self.sessions)

    @property
    def merged_rate(self) -> float | None:
        return _ratio(self.merged, self.prs)

    @property
    def first_review_avg_s(self) -> float | None:
        return _ratio(self.first_review_s, self.reviewed)

    @property
    def merge_avg_s(self) -> float | None:
        return _ratio(self.merge_s, self.merged)

    @property
    def rounds_per_merged(self) -> float | None:
        return _ratio(self.merged_rounds, self.merged)

    @property
    def reviewer_minutes(self) -> float:
        return self.review_s / 60

    @property
    def merged_per_reviewer_hour(self) -> float | None:
        return _ratio(self.merged, self.review_s / 3600)

    @property
    def lines_per_reviewer_hour(self) -> float | None:
        return _ratio(self.merged_lines, self.review_s / 3600)

    @property
    def sandbox_minutes(self) -> float:
        return self.sandbox_s / 60

    @property
    def sandbox_cost_usd(self) -> float:
        """Sandbox time at INSPECT_SANDBOX_USD_PER_MINUTE."""
        return self.sandbox_minutes * settings.SANDBOX_USD_PER_MINUTE

    @property
    def total_cost_usd(self) -> float:
        """Every model request of the sessions (all runtimes, through the gateway; work and
        review agent alike) and their sandbox time."""
        return self.cost_usd + self.review_cost_usd + self.sandbox_cost_usd

    @property
    def cost_per_merged(self) -> float | None:
        return _ratio(self.total_cost_usd, self.merged)

    @property
    def retries_per_session(self) -> float | None:
        return _ratio(self.retries, self.sessions)

    @property
    def verify_pass_rate(self) -> float | None:
        return _ratio(self.verify_ok, self.verify_n)

    @property
    def ci_fix_green_rate(self) -> float | None:
        return _ratio(self.ci_fixes_green, self.ci_fixes)

    @property
    def escaped_rate(self) -> float | None:
        return _ratio(self.escaped, self.merged)

    @property
    def snapshot_age_avg_s(self) -> float | None:
        return _ratio(self.snapshot_s, self.snapshot_n)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


@dataclass
class MetricsReport:
    """Every figure of a range: the total, one Figures per period (`series`, oldest first) and
    per repository, and who is prompting now."""

    period: Period
    start: date
    end: date  # inclusive
    repositories: list[Repository]
    total: Figures = field(default_factory=Figures)
    series: list[tuple[date, Figures]] = field(default_factory=list)
    by_repository: list[tuple[Repository, Figures]] = field(default_factory=list)
    prompting_now: int = 0
    prompting_now_by_repository: dict[int, int] = field(default_factory=dict)
