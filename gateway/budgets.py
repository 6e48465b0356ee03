"""Budgets: whether a request may go, given what its user, repository and the site have spent
this day and month (filled in by the budgets work; see docs/model-gateway.md)."""

from __future__ import annotations

from dataclasses import dataclass

from sessions.models import ModelAccess


@dataclass(frozen=True)
class Refusal:
    """Why the gateway will not forward a request: the HTTP status, the provider-shaped error
    `kind` (e.g. "rate_limit_error") and a message the runtime shows."""

    status: int
    kind: str
    message: str
    outcome: str  # a ModelRequest.Outcome value


async def admit(access: ModelAccess, model: str) -> Refusal | None:
    """None when this request may go now. When it would pass a budget, the turn is paused
    (a session event says which budget, what is left and who can raise it) until an admin
    raises it or INSPECT_BUDGET_PAUSE_SECONDS pass; then a 429 Refusal naming the budget."""
    return None
