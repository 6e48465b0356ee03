"""What a metrics request covers: the repositories a user may see the metrics of, the date
range (parsed from the query string) and its periods."""

from __future__ import annotations

from datetime import UTC, date, timedelta

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils import timezone

from accounts import access, roles
from metrics.figures import Period
from snapshots.models import Repository

DEFAULT_DAYS = 90
MAX_DAYS = 731


def metrics_repositories(user: access.AnyUser) -> list[Repository]:
    """Repositories whose metrics `user` may see (manager or admin role), by name."""
    return list(access.repositories_for(user, permission=roles.VIEW_METRICS).order_by("name"))


def metrics_scope(
    user: access.AnyUser, *, repository: str = "", allowed: list[Repository] | None = None
) -> list[Repository]:
    """The repositories a metrics request covers: all `user` may see, or the one named.

    Raises Http404 when the named repository is not one the user is a member of (it may not
    exist, and ids must not be probed) and PermissionDenied when they are a member whose role
    does not grant VIEW_METRICS.
    """
    allowed = metrics_repositories(user) if allowed is None else allowed
    if not repository:
        return allowed
    for repo in allowed:
        if repo.name == repository:
            return [repo]
    member_of = access.repositories_for(user).filter(name=repository).first()
    if member_of is None:
        raise Http404("No repository matches this name.")
    raise PermissionDenied(
        f"Your role on {member_of.name} does not show its metrics; ask a repository admin "
        "for the manager role."
    )


def parse_range(
    start: str | None, end: str | None, *, today: date | None = None
) -> tuple[date, date]:
    """Dates from ISO strings (either may be empty): the default is the last DEFAULT_DAYS days.
    Raises ValueError with a message a person can act on."""
    today = today or timezone.now().astimezone(UTC).date()
    try:
        last = date.fromisoformat(end) if end else today
        first = date.fromisoformat(start) if start else last - timedelta(days=DEFAULT_DAYS - 1)
    except ValueError:
        raise ValueError("Dates must look like 2026-01-31.") from None
    if first > last:
        raise ValueError(f"The range starts ({first}) after it ends ({last}).")
    if (last - first).days >= MAX_DAYS:
        raise ValueError(f"A range covers at most {MAX_DAYS} days.")
    return first, last


def period_starts(period: Period, start: date, end: date) -> list[date]:
    """Every bucket of the range, oldest first (weeks begin on Monday, as TruncWeek's)."""
    if period == "week":
        first = start - timedelta(days=start.weekday())
        step = timedelta(days=7)
    else:
        first, step = start, timedelta(days=1)
    out, current = [], first
    while current <= end:
        out.append(current)
        current += step
    return out
