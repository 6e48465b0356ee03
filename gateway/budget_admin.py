"""Setting budgets (site admins only, every change audited) and what each has spent: what the
/budgets/ page and `manage.py inspect budget` both call."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction

from approvals import audit
from gateway import budgets
from gateway.models import Budget
from snapshots.models import Repository

MAX_LIMIT_USD = Decimal("10000000")
NOT_ADMIN = "Only site admins set budgets; ask one to raise yours."


class BudgetError(ValueError):
    """Input that cannot become a budget; `field` names the form field it is about."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def may_manage_budgets(user) -> bool:
    """Site admins (superusers) and staff set budgets; nobody else sees them."""
    return bool(
        getattr(user, "is_authenticated", False)
        and user.is_active
        and (user.is_superuser or user.is_staff)
    )


def require_budget_admin(user) -> None:
    if not may_manage_budgets(user):
        raise PermissionDenied(NOT_ADMIN)


@dataclass(frozen=True)
class BudgetRow:
    """A budget as the page shows it: its name and what its current period spent."""

    budget: Budget
    name: str
    spent_usd: float
    left_usd: float
    spent: bool  # the limit is reached: the turns it covers pause

    @property
    def used_percent(self) -> int:
        limit = float(self.budget.limit_usd)
        return 100 if limit <= 0 else min(int(self.spent_usd / limit * 100), 100)


def budget_rows() -> list[BudgetRow]:
    """Every budget, sites first then repositories then users, with this period's spend."""
    order = {Budget.Scope.SITE: 0, Budget.Scope.REPOSITORY: 1, Budget.Scope.USER: 2}
    saved = list(Budget.objects.select_related("user", "repository", "updated_by"))
    limits = [budgets.limit_of(b) for b in saved]
    spent = budgets.spends_of(limits, fresh=True)  # one query, whatever the number of budgets
    rows = [
        BudgetRow(
            budget=budget,
            name=limit.name,
            spent_usd=spent[limit.pk],
            left_usd=max(limit.limit_usd - spent[limit.pk], 0.0),
            spent=spent[limit.pk] >= limit.limit_usd,
        )
        for budget, limit in zip(saved, limits, strict=True)
    ]
    rows.sort(key=lambda r: (order[r.budget.scope], r.name))
    return rows


def parse_limit(text: str) -> Decimal:
    """A limit in dollars from what someone typed ("12.50", "$12.50")."""
    cleaned = (text or "").strip().lstrip("$").replace(",", "")
    if not cleaned:
        raise BudgetError("Give the limit in dollars, e.g. 25 or 12.50.", "limit_usd")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise BudgetError(
            f"The limit must be a number of dollars, e.g. 25 or 12.50 (not {text!r}).", "limit_usd"
        ) from None
    if not value.is_finite() or value < 0:
        raise BudgetError("The limit must be zero or more dollars.", "limit_usd")
    if value > MAX_LIMIT_USD:
        raise BudgetError(f"The limit must be at most ${MAX_LIMIT_USD:,}.", "limit_usd")
    return value.quantize(Decimal("0.0001"))


def target_of(scope: str, target: str) -> dict:
    """The user or repository a budget of `scope` is for, as Budget fields."""
    target = (target or "").strip()
    if scope == Budget.Scope.SITE:
        if target:
            raise BudgetError("A site budget is for everyone: leave the target empty.", "target")
        return {"user": None, "repository": None}
    if scope == Budget.Scope.USER:
        user = get_user_model().objects.filter(username=target).first() if target else None
        if user is None:
            raise BudgetError(
                f"No user named {target!r}." if target else "Name the user.", "target"
            )
        return {"user": user, "repository": None}
    if scope == Budget.Scope.REPOSITORY:
        repository = Repository.objects.filter(name=target).first() if target else None
        if repository is None:
            raise BudgetError(
                f"No repository named {target!r}." if target else "Name the repository.", "target"
            )
        return {"user": None, "repository": repository}
    raise BudgetError("The scope must be user, repository or site.", "scope")


def _check_period(period: str) -> None:
    if period not in Budget.Period.values:
        raise BudgetError("The period must be day or month.", "period")


def _audit_data(budget: Budget, before: Decimal | None, after: Decimal | None) -> dict:
    return {
        "budget": budgets.limit_of(budget).name,
        "scope": budget.scope,
        "period": budget.period,
        "before_usd": None if before is None else str(before),
        "after_usd": None if after is None else str(after),
    }


def budget_set(*, by, scope: str, period: str, target: str, limit_usd: str | Decimal) -> Budget:
    """Create the budget, or change its limit if it exists (one per scope, target and period).
    Raises PermissionDenied for anyone but a site admin and BudgetError for bad input."""
    require_budget_admin(by)
    _check_period(period)
    fields = target_of(scope, target)
    limit = limit_usd if isinstance(limit_usd, Decimal) else parse_limit(limit_usd)
    with transaction.atomic():
        budget = (
            Budget.objects.select_for_update(of=("self",))
            .filter(scope=scope, period=period, **fields)
            .select_related("user", "repository")
            .first()
        )
        before = budget.limit_usd if budget is not None else None
        if budget is None:
            budget = Budget.objects.create(
                scope=scope, period=period, limit_usd=limit, updated_by=by, **fields
            )
        else:
            budget.limit_usd = limit
            budget.updated_by = by
            budget.save(update_fields=["limit_usd", "updated_by", "updated_at"])
        audit.record(
            "budget.create" if before is None else "budget.change",
            actor=by,
            repository=fields["repository"],
            object_type="budget",
            object_id=budget.pk,
            data=_audit_data(budget, before, limit),
        )
    budgets.clear_cache()
    return budget


def budget_change(*, by, budget: Budget, limit_usd: str | Decimal) -> Budget:
    """Change an existing budget's limit (its scope, target and period stay)."""
    return budget_set(
        by=by,
        scope=budget.scope,
        period=budget.period,
        target=budgets.limit_of(budget).target,
        limit_usd=limit_usd,
    )


def budget_remove(*, by, budget: Budget) -> None:
    """Delete a budget: the turns it paused go on."""
    require_budget_admin(by)
    with transaction.atomic():
        data = _audit_data(budget, budget.limit_usd, None)
        repository, pk = budget.repository, budget.pk
        budget.delete()
        audit.record(
            "budget.delete",
            actor=by,
            repository=repository,
            object_type="budget",
            object_id=pk,
            data=data,
        )
    budgets.clear_cache()


def budget_named(scope: str, period: str, target: str) -> Budget:
    """The existing budget of this scope, target and period (BudgetError if there is none)."""
    _check_period(period)
    fields = target_of(scope, target)
    budget = Budget.objects.filter(scope=scope, period=period, **fields).first()
    if budget is None:
        who = "the site" if scope == Budget.Scope.SITE else f"{scope} {target}"
        raise BudgetError(f"{who} has no {period} budget.")
    return budget
