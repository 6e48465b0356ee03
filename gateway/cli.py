"""`manage.py inspect budget list|set|remove`, `inspect models REPO [--allow ...]
[--default MODEL]` and `inspect models provider list|set|test|remove`: model budgets, each
repository's models and the site's provider accounts from the shell (the same actions and rules
as the pages: site admins set budgets and providers, repository admins set a repository's
models; every change audited, never a key)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from accounts.identity import user_named
from gateway import budget_admin
from gateway import provider_accounts as providers
from gateway.allowed_models import ModelListError, allowed_models_set, default_model_set
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

    models = areas.add_parser(
        "models", help="a repository's models, or the site's model providers",
        description="inspect models REPO [--allow ...|--any] [--default MODEL], or "
        "inspect models provider list|set|test|remove",
    ).add_subparsers(
        dest="models_area", metavar="REPO|provider", required=True, action=_RepositoryOrProvider
    )  # fmt: skip
    repository = command_parser(
        models, "repo", models_put, "show or set the models a repository's agents may use"
    )
    repository.add_argument("repo")
    repository.add_argument(
        "--allow", nargs="+", metavar="MODEL", help="names, or prefixes ending *"
    )
    repository.add_argument("--any", action="store_true", help="allow every model (clear the list)")
    repository.add_argument(
        "--default",
        metavar="MODEL",
        help="the model new sessions use when they name none ('' clears)",
    )
    repository.add_argument("--as", dest="as_user", metavar="USER")
    _register_providers(models)


class _RepositoryOrProvider(argparse._SubParsersAction):
    """`models REPO …` and `models provider …`: a first word that is not a subcommand is a
    repository's name (`models repo NAME` reaches a repository named "provider")."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # argparse checks the first word against `choices` before calling this action.
        self.choices = _AnyName(self._name_parser_map)

    def __call__(self, parser, namespace, values, option_string=None):
        if values and values[0] not in self._name_parser_map:
            values = ["repo", *values]
        super().__call__(parser, namespace, values, option_string)


class _AnyName(Mapping):
    """The subcommands by name, where any other word passes argparse's check (a repository)."""

    def __init__(self, names: dict) -> None:
        self.names = names

    def __contains__(self, name: object) -> bool:
        return True

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        return self.names[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def _register_providers(models) -> None:
    kinds = list(providers.accounts.KINDS)
    provider = models.add_parser(
        "provider", help="the site's model provider accounts (site admins)"
    ).add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = command_parser(provider, "list", provider_list, "each account and its source")
    listing.add_argument("--json", action="store_true")
    put = command_parser(
        provider, "set", provider_put,
        "set or replace an account; the key is read from stdin (--key-stdin) or a variable",
    )  # fmt: skip
    put.add_argument("kind", choices=kinds)
    key = put.add_mutually_exclusive_group()
    key.add_argument("--key-stdin", action="store_true", help="read the key from stdin")
    key.add_argument("--key-env", metavar="VAR", help="read the key from this variable")
    put.add_argument(
        "--base-url", help="Anthropic (optional; '' for its default), compatible (required)"
    )
    test = command_parser(provider, "test", provider_check, "one tiny request to the provider")
    remove = command_parser(provider, "remove", provider_delete, "remove an account")
    for parser in (put, test, remove):
        if parser is not put:
            parser.add_argument("kind", choices=kinds)
        parser.add_argument("--as", dest="as_user", metavar="USER")


def provider_list(command: BaseCommand, options: dict[str, Any]) -> int:
    rows = providers.provider_list()
    if options["json"]:
        command.stdout.write(
            json.dumps(
                [
                    {
                        "kind": a.kind, "label": a.label, "configured": a.configured,
                        "key_set": a.key_set, "key_hint": a.key_hint, "key_source": a.key_source,
                        "base_url": a.base_url, "base_source": a.base_source, "error": a.error,
                    }
                    for a in rows
                ]
            )
        )  # fmt: skip
        return 0
    for a in rows:
        if not a.configured:
            state = f"not set{f' (stored key unreadable: {a.error})' if a.error else ''}"
        else:
            key = f"key {a.key_hint or 'set'} from the {a.key_source}" if a.key_set else "no key"
            state = f"connected: {key}; {a.base_url} from the {a.base_source}"
        command.stdout.write(inert(f"{a.kind}: {state}"))
    return 0


def _key_from(options: dict[str, Any]) -> str:
    if options.get("key_env"):
        if options["key_env"] not in os.environ:
            raise CommandError(f"--key-env: the variable {options['key_env']} is not set")
        return os.environ[options["key_env"]]
    if options.get("key_stdin"):
        return (options.get("stdin") or sys.stdin).readline().strip()
    return ""


def provider_put(command: BaseCommand, options: dict[str, Any]) -> int:
    try:
        account = providers.provider_set(
            kind=options["kind"], by=user_named(options["as_user"]), key=_key_from(options),
            base_url=options["base_url"],
        )  # fmt: skip
    except (providers.ProviderError, PermissionDenied) as exc:
        raise CommandError(f"{exc} Nothing was saved.") from None
    command.stdout.write(inert(f"{account.kind}: saved (audited); test it with `inspect models "
                               f"provider test {account.kind}`"))  # fmt: skip
    return 0


def provider_check(command: BaseCommand, options: dict[str, Any]) -> int:
    try:
        result = providers.provider_test(kind=options["kind"], by=user_named(options["as_user"]))
    except (providers.ProviderError, PermissionDenied) as exc:
        raise CommandError(str(exc)) from None
    if not result.ok:
        raise CommandError(inert(f"{options['kind']}: refused: {result.message}"))
    command.stdout.write(inert(f"{options['kind']}: {result.message}"))
    return 0


def provider_delete(command: BaseCommand, options: dict[str, Any]) -> int:
    try:
        providers.provider_remove(kind=options["kind"], by=user_named(options["as_user"]))
    except (providers.ProviderError, PermissionDenied) as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(inert(f"{options['kind']}: removed (audited)"))
    return 0


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
    if options["default"] is not None:
        try:
            default_model_set(
                repository=repository, model=options["default"], by=user_named(options["as_user"])
            )
        except (ModelListError, PermissionDenied) as exc:
            raise CommandError(f"{exc} The default of {repository.name} is unchanged.") from None
    if repository.default_model:
        command.stdout.write(
            inert(f"{repository.name}'s default model: {repository.default_model}")
        )
    allowed = repository.allowed_models or []
    if allowed:
        command.stdout.write(inert(f"{repository.name} may use: {', '.join(allowed)}"))
    else:
        command.stdout.write(inert(f"{repository.name} may use every model"))
    return 0
