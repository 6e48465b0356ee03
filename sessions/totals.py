"""What the metrics add up changed: a session's totals (cost, sandbox time, retries, verify,
start latency, snapshot age), its pull request or that PR's reviews, written by an UPDATE that
sends no post_save. The metrics (a layer above) listen and mark their rollups stale
(metrics/rollups.py); nothing here knows about them (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Iterable

from django.dispatch import Signal

from sessions.models import Session

# The Session fields the metrics add up (an UPDATE of any of them announces the change).
TOTALS = frozenset(
    {"cost_usd", "sandbox_seconds", "retries", "verify_ok", "start_ms", "snapshot_age_s"}
)
# Sent with session_ids= inside the writer's transaction, after its UPDATE.
session_totals_changed = Signal()


def totals_changed(session_ids: Iterable[int]) -> None:
    """Announce that what the metrics add up changed for these sessions."""
    session_totals_changed.send(Session, session_ids=list(session_ids))
