"""`manage.py inspect budget list|set|remove` and `inspect models REPO [--allow ...]`: model
budgets and each repository's allowed models from the shell (the same rules as the pages:
site admins set budgets, repository admins set models; every change audited)."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from accounts.identity import user_named
from gateway import budget_admin
from gateway.allowed_models import ModelListError, allowed_models_set
from gateway.models import Budget
from inspect_web.cli_args import command_parser
from inspect_web.text import inert
from snapshots.cli import repository_named


def register(areas, command: BaseCommand) -> None:
    budget = areas.add_parser("budget", help="model budgets (site admins)").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    listing = command_parser(
        budget, "list", budget_list, "every budget with what its current period spent"
    )
    listing.add_argument("--json", action="store_true")
    put = command_parser(
        budget, "set", budget_put, "set a budget (creates it, or changes its limit)"
    )
    remove = command_parser(budget, "remove", budget_delete, "remove a budget")
    for parser in (put, remove):
        parser.add_argument("scope", choices=Budget.Scope.values)
        parser.add_argument(
            "target", nargs="?", default="", help="the user or repository (none for the site)"
        )
        parser.add_argument("--period", choices=Budget.Period.values, required=True)
        parser.add_argument("--as", dest="as_user", metavar="USER")
    put.add_argument("--limit", required=True, metavar="USD", help="dollars, e.g. 25 or 12.50")

    models = command_parser(
        areas, "models", models_put, "show or set the models a repository's agents may use"
    )
    models.add_argument("repo")
    models.add_argument("--allow", nargs="+", metavar="MODEL", help="names, or prefixes ending *")
    models.add_argument("--any", action="store_true", help="allow every model (clear the list)")
    models.add_argument("--as", dest="as_user", metavar="USER")


def budget_list(command: BaseCommand, options: dict[str, Any]) -> int:
    rows = budget_admin.budget_rows()
    if options["json"]:
        command.stdout.write(
            json.dumps(
                [
                    {
                        "id": r.budget.pk,
                        "name": r.name,
                        "scope": r.budget.scope,
                        "period": r.budget.period,
                        "target": budget_admin.budgets.limit_of(r.budget).target,
                        "limit_usd": float(r.budget.limit_usd),
                        "spent_usd": round(r.spent_usd, 4),
                        "left_usd": round(r.left_usd, 4),
                        "spent": r.spent,
                    }
                    for r in rows
                ]
            )
        )
        return 0
    if not rows:
        command.stdout.write("no budgets: agents may spend without limit")
    for r in rows:
        flag = "  SPENT: turns pause" if r.spent else ""
        command.stdout.write(
            inert(
                f"{r.name}: ${float(r.budget.limit_usd):.2f}, spent ${r.spent_usd:.2f}, "
                f"left ${r.left_usd:.2f}{flag}"
            )
        )
    return 0


def budget_put(command: BaseCommand, options: dict[str, Any]) -> int:
    try:
        budget = budget_admin.budget_set(
            by=user_named(options["as_user"]),
            scope=options["scope"],
            period=options["period"],
            target=options["target"],
            limit_usd=options["limit"],
        )
    except (budget_admin.BudgetError, PermissionDenied) as exc:
        raise CommandError(str(exc)) from None
    name = budget_admin.budgets.limit_of(budget).name
    command.stdout.write(inert(f"{name}: ${float(budget.limit_usd):.2f} (audited)"))
    return 0


def budget_delete(command: BaseCommand, options: dict[str, Any]) -> int:
    try:
        by = user_named(options["as_user"])
        budget_admin.require_budget_admin(by)
        budget = budget_admin.budget_named(options["scope"], options["period"], options["target"])
        name = budget_admin.budgets.limit_of(budget).name
        budget_admin.budget_remove(by=by, budget=budget)
    except (budget_admin.BudgetError, PermissionDenied) as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(inert(f"{name} removed (audited)"))
    return 0


def models_put(command: BaseCommand, options: dict[str, Any]) -> int:
    repository = repository_named(options["repo"])
    if options["allow"] and options["any"]:
        raise CommandError("give either --allow MODEL ... or --any, not both")
    if options["allow"] or options["any"]:
        try:
            allowed_models_set(
                repository=repository,
                models=[] if options["any"] else options["allow"],
                by=user_named(options["as_user"]),
            )
        except (ModelListError, PermissionDenied) as exc:
            raise CommandError(f"{exc} The list of {repository.name} is unchanged.") from None
    allowed = repository.allowed_models or []
    if allowed:
        command.stdout.write(inert(f"{repository.name} may use: {', '.join(allowed)}"))
    else:
        command.stdout.write(inert(f"{repository.name} may use every model"))
    return 0
