"""Budgets: whether a request may go, given what its user, repository and the site have spent
this UTC day and month (docs/model-gateway.md, "Budgets and model policy").

The gateway calls `admit` before forwarding each request. Spend is the sum of
ModelRequest.cost_usd; it and the budget rows are cached for about a second per gateway process,
so a request pays for the queries at most once a second. A request that finds a budget spent
pauses its turn: one `budget_paused` event per turn (a Redis SET NX decides who writes it), then
every waiting request polls until an admin raises or removes the budget (`budget_resumed`,
the request goes), the turn's access ends (401), or BUDGET_PAUSE_SECONDS pass (429 naming the
budget; later requests of the same turn are refused at once while the budget stays spent).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Q, Sum
from django.utils import timezone

from gateway.models import Budget, ModelRequest
from inspect_web.redis_client import get_redis
from sessions.events import append_event
from sessions.models import ModelAccess, Prompt

log = logging.getLogger(__name__)
T = TypeVar("T")

CACHE_SECONDS = 1.0  # how stale a spend figure or the budget rows may be on the fast path
POLL_SECONDS = 1.0  # how often a paused request looks again
RAISE_AT = "/budgets/"
ACCESS_ENDED = "this session's model access ended; start a new turn"


@dataclass(frozen=True)
class Refusal:
    """Why the gateway will not forward a request: the HTTP status, the provider-shaped error
    `kind` (e.g. "rate_limit_error") and a message the runtime shows."""

    status: int
    kind: str
    message: str
    outcome: str  # a ModelRequest.Outcome value


@dataclass(frozen=True)
class Limit:
    """One budget as the check sees it (a snapshot of the row, safe to cache)."""

    pk: int
    scope: str
    period: str
    user_id: int | None
    repository_id: int | None
    target: str  # the username or repository name ("" for the site)
    limit_usd: float

    @property
    def name(self) -> str:
        """How people call it: "the daily budget of user ada"."""
        period = "daily" if self.period == Budget.Period.DAY else "monthly"
        if self.scope == Budget.Scope.SITE:
            return f"the site's {period} budget"
        return f"the {period} budget of {self.scope} {self.target}"


@dataclass(frozen=True)
class Spent:
    """A budget whose period's spend reached its limit."""

    limit: Limit
    spent_usd: float

    @property
    def left_usd(self) -> float:
        return max(self.limit.limit_usd - self.spent_usd, 0.0)


def limit_of(budget: Budget) -> Limit:
    target = ""
    if budget.scope == Budget.Scope.USER and budget.user is not None:
        target = budget.user.get_username()
    elif budget.scope == Budget.Scope.REPOSITORY and budget.repository is not None:
        target = budget.repository.name
    return Limit(
        pk=budget.pk,
        scope=budget.scope,
        period=budget.period,
        user_id=budget.user_id,
        repository_id=budget.repository_id,
        target=target,
        limit_usd=float(budget.limit_usd),
    )


def period_start(period: str, now: datetime | None = None) -> datetime:
    """The start of the current UTC day or month."""
    now = (now or timezone.now()).astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return day.replace(day=1) if period == Budget.Period.MONTH else day


# -- the figures, cached per process ------------------------------------------------------------

_budget_cache: dict[tuple[int | None, int], tuple[float, list[Limit]]] = {}
_spend_cache: dict[tuple[str, int | None, str, datetime], tuple[float, float]] = {}


def clear_cache() -> None:
    """Forget cached budgets and spend (tests; a process that just changed a budget)."""
    _budget_cache.clear()
    _spend_cache.clear()


def limits_for(user_id: int | None, repository_id: int, *, fresh: bool = False) -> list[Limit]:
    """The budgets a request of this user in this repository counts against: the user's, the
    repository's and the site's, user first and days before months."""
    key = (user_id, repository_id)
    hit = _budget_cache.get(key)
    now = time.monotonic()
    if hit is not None and not fresh and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    where = Q(scope=Budget.Scope.SITE) | Q(
        scope=Budget.Scope.REPOSITORY, repository_id=repository_id
    )
    if user_id is not None:
        where |= Q(scope=Budget.Scope.USER, user_id=user_id)
    order = {Budget.Scope.USER: 0, Budget.Scope.REPOSITORY: 1, Budget.Scope.SITE: 2}
    rows = Budget.objects.filter(where).select_related("user", "repository")
    limits = sorted((limit_of(b) for b in rows), key=lambda b: (order[b.scope], b.period))
    _budget_cache[key] = (now, limits)
    return limits


def _spend_key(limit: Limit) -> tuple[str, int | None, str, datetime]:
    target = {Budget.Scope.USER: limit.user_id, Budget.Scope.REPOSITORY: limit.repository_id}
    return (limit.scope, target.get(limit.scope), limit.period, period_start(limit.period))


def spends_of(limits: list[Limit], *, fresh: bool = False) -> dict[int, float]:
    """Each budget's spend (by pk): cached ones from the cache, the rest in one query that
    reads the period's requests once (a FILTERed sum per budget)."""
    now = time.monotonic()
    found: dict[int, float] = {}
    missing: list[Limit] = []
    for limit in limits:
        hit = _spend_cache.get(_spend_key(limit))
        if hit is not None and not fresh and now - hit[0] < CACHE_SECONDS:
            found[limit.pk] = hit[1]
        else:
            missing.append(limit)
    if not missing:
        return found
    sums, rows = {}, Q()
    for limit in missing:
        scope, target, _, since = _spend_key(limit)
        where = Q(created_at__gte=since)
        if scope != Budget.Scope.SITE:
            where &= Q(**{f"{scope}_id": target})
        sums[f"b{limit.pk}"] = Sum("cost_usd", filter=where)
        rows |= where
    totals = ModelRequest.objects.filter(rows).aggregate(**sums)
    for limit in missing:
        spent = float(totals[f"b{limit.pk}"] or 0.0)
        _spend_cache[_spend_key(limit)] = (now, spent)
        found[limit.pk] = spent
    return found


UNKNOWN = object()  # cached_first_spent: a figure is not cached (or too old): ask the database


def cached_first_spent(user_id: int | None, repository_id: int) -> Spent | None | object:
    """`first_spent` from the cached figures alone, without the database (so on the event
    loop, no thread hop before a request is forwarded); UNKNOWN when one is missing or old."""
    now = time.monotonic()
    hit = _budget_cache.get((user_id, repository_id))
    if hit is None or now - hit[0] >= CACHE_SECONDS:
        return UNKNOWN
    for limit in hit[1]:
        spend = _spend_cache.get(_spend_key(limit))
        if spend is None or now - spend[0] >= CACHE_SECONDS:
            return UNKNOWN
        if spend[1] >= limit.limit_usd:
            return Spent(limit, spend[1])
    return None


def first_spent(user_id: int | None, repository_id: int, *, fresh: bool = False) -> Spent | None:
    """The first budget of this request whose spend reached its limit, or None."""
    limits = limits_for(user_id, repository_id, fresh=fresh)
    if not limits:
        return None
    spends = spends_of(limits, fresh=fresh)
    for limit in limits:
        if spends[limit.pk] >= limit.limit_usd:
            return Spent(limit, spends[limit.pk])
    return None


# -- the pause ------------------------------------------------------------------------------------


def pause_key(access: ModelAccess) -> str:
    """The turn's pause state. Per ModelAccess (one per run of a turn), so a retried turn
    pauses, and says so, afresh; named by its token's hash, which unlike its id is never
    reused (a database created again restarts ids while Redis still holds the old keys)."""
    return f"gateway:budget-pause:{access.token_sha256}"


def refusal_for(spent: Spent) -> Refusal:
    return Refusal(
        status=429,
        kind="rate_limit_error",
        message=(
            f"Budget spent: {spent.limit.name} (${spent.spent_usd:.2f} of "
            f"${spent.limit.limit_usd:.2f}, ${spent.left_usd:.2f} left). An admin can raise it "
            f"at {RAISE_AT}."
        ),
        outcome=ModelRequest.Outcome.REFUSED_BUDGET,
    )


def _access_ended() -> Refusal:
    return Refusal(
        status=401,
        kind="authentication_error",
        message=ACCESS_ENDED,
        outcome=ModelRequest.Outcome.REFUSED_BUDGET,  # it ended while the turn waited on a budget
    )


def _still_active(access_id: int) -> bool:
    return ModelAccess.objects.filter(
        pk=access_id, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ).exists()


def _turn(prompt_id: int) -> int:
    return Prompt.objects.filter(pk=prompt_id).values_list("order", flat=True).first() or 0


def _key_ttl(access: ModelAccess) -> int:
    """The pause state lives as long as the turn's token could."""
    left = (access.expires_at - timezone.now()).total_seconds()
    return max(int(left), settings.BUDGET_PAUSE_SECONDS + 60, 60)


def _begin_pause(access: ModelAccess, spent: Spent) -> str:
    """Mark the turn paused; the first request to do so writes the event. Returns the state the
    turn was already in ("refused" once a pause timed out), or "" for a pause that goes on."""
    key = pause_key(access)
    try:
        first = get_redis().set(key, "paused", nx=True, ex=_key_ttl(access))
    except redis.RedisError as exc:  # the pause must still be seen, even if twice
        log.warning("budget pause of turn %s without Redis: %s", access.prompt_id, exc)
        first = True
    if first:
        limit = spent.limit
        append_event(
            access.session_id,
            "budget_paused",
            {
                "budget": limit.name,
                "scope": limit.scope,
                "period": limit.period,
                "spent_usd": round(spent.spent_usd, 4),
                "limit_usd": limit.limit_usd,
                "left_usd": round(spent.left_usd, 4),
                "wait_s": settings.BUDGET_PAUSE_SECONDS,
                "raise_at": RAISE_AT,
                "message": (
                    f"Paused: {limit.name} is spent (${spent.spent_usd:.2f} of "
                    f"${limit.limit_usd:.2f}, ${spent.left_usd:.2f} left). An admin can raise it "
                    f"at {RAISE_AT}; the turn goes on then, or its model requests are refused "
                    f"after {settings.BUDGET_PAUSE_SECONDS} s."
                ),
                "turn": _turn(access.prompt_id),
            },
        )
        return ""
    state = get_redis().get(key) or b""
    return "refused" if state == b"refused" else ""


def _end_pause(access: ModelAccess, spent: Spent, waited_s: float) -> None:
    """The budget was raised or removed: the one request that clears the mark says so."""
    try:
        if not get_redis().delete(pause_key(access)):
            return
    except redis.RedisError:  # nobody can tell who says it: the budget page shows it anyway
        return
    limit = spent.limit
    now = Budget.objects.filter(pk=limit.pk).values_list("limit_usd", flat=True).first()
    how = "removed" if now is None else f"raised to ${float(now):.2f}"
    append_event(
        access.session_id,
        "budget_resumed",
        {
            "budget": limit.name,
            "limit_usd": None if now is None else float(now),
            "waited_s": round(waited_s, 1),
            "message": f"Resumed: {limit.name} was {how}.",
            "turn": _turn(access.prompt_id),
        },
    )


def _give_up(access: ModelAccess, spent: Spent) -> None:
    """The pause timed out: later requests of the turn are refused at once (the runtimes retry a
    429), and the log says so once."""
    key = pause_key(access)
    try:
        if get_redis().getset(key, "refused") == b"refused":
            return
        get_redis().expire(key, _key_ttl(access))
    except redis.RedisError as exc:
        log.warning("budget refusal of turn %s without Redis: %s", access.prompt_id, exc)
    append_event(
        access.session_id,
        "error",
        {
            "message": f"{refusal_for(spent).message} The turn waited "
            f"{settings.BUDGET_PAUSE_SECONDS} s; its model requests are refused now.",
            "phase": "budget",
            "turn": _turn(access.prompt_id),
        },
    )


def _check(access: ModelAccess, *, fresh: bool = False) -> Spent | None:
    return first_spent(access.user_id, access.repository_id, fresh=fresh)


def _reconnecting(fn: Callable[..., T]) -> Callable[..., T]:
    """A pool thread keeps its database connection between calls; one the server dropped (a
    restart, a failover) is replaced once instead of failing every later check."""

    @functools.wraps(fn)
    def run(*args, **kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block:
                raise
            connection.close()
            return fn(*args, **kwargs)

    return run


# Off the event loop, each call in a pool thread: a slow query never holds other sessions.
_in_thread = {
    name: sync_to_async(_reconnecting(fn), thread_sensitive=False)
    for name, fn in {
        "check": _check,
        "begin": _begin_pause,
        "end": _end_pause,
        "give_up": _give_up,
        "active": _still_active,
    }.items()
}


async def admit(access: ModelAccess, model: str) -> Refusal | None:
    """None when this request may go now. When it would pass a budget, the turn is paused
    (a session event says which budget, what is left and who can raise it) until an admin
    raises it or INSPECT_BUDGET_PAUSE_SECONDS pass; then a 429 Refusal naming the budget."""
    spent = cached_first_spent(access.user_id, access.repository_id)
    if spent is UNKNOWN:
        spent = await _in_thread["check"](access)
    if spent is None:
        return None
    spent = await _in_thread["check"](access, fresh=True)  # not a second-old figure: pause?
    if spent is None:
        return None
    if await _in_thread["begin"](access, spent) == "refused":
        return refusal_for(spent)
    started = time.monotonic()
    deadline = started + settings.BUDGET_PAUSE_SECONDS
    while True:
        await asyncio.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.0)))
        if not await _in_thread["active"](access.pk):
            return _access_ended()
        now_spent = await _in_thread["check"](access, fresh=True)
        if now_spent is None:
            await _in_thread["end"](access, spent, time.monotonic() - started)
            return None
        spent = now_spent
        if time.monotonic() >= deadline:
            await _in_thread["give_up"](access, spent)
            return refusal_for(spent)
