"""`manage.py inspect policy|recipe|secret …`: a repository's controls from the shell: its
approval policy, its dashboard recipe (a wider egress waits for approval) and its secrets."""

from __future__ import annotations

import os
import sys

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import CommandError
from django.urls import reverse

from accounts.identity import user_named
from approvals import gate
from approvals.models import ApprovalPolicy, RepositorySecret
from approvals.policy_change import policy_set
from approvals.policy_rules import DEFAULT_POLICY, PolicyError
from approvals.secrets import SecretsUnavailable, secret_delete, secret_set
from inspect_web.cli_args import command_parser
from snapshots.cli import repository_named
from snapshots.egress import recipe_override_set
from snapshots.recipe import RecipeError
from snapshots.restore import current_recipe


def register(areas, command) -> None:
    policy = areas.add_parser("policy", help="a repository's approval policy").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    show = command_parser(
        policy, "show", policy_show, "print the policy (TOML; the default if none is set)"
    )
    show.add_argument("repo")
    put_policy = command_parser(
        policy, "set", policy_put, "replace the policy (TOML from --file or stdin)"
    )
    put_policy.add_argument("repo")
    put_policy.add_argument("--file", metavar="PATH", help="read the TOML from this file")
    put_policy.add_argument("--as", dest="as_user", metavar="USER")

    recipe = areas.add_parser(
        "recipe", help="a repository's dashboard recipe (wider egress waits for approval)"
    ).add_subparsers(dest="action", metavar="ACTION", required=True)
    show = command_parser(
        recipe, "show", recipe_show, "print the recipe override and the egress in force"
    )
    show.add_argument("repo")
    put_recipe = command_parser(
        recipe, "set", recipe_put, "set the override (TOML; empty clears it)"
    )
    put_recipe.add_argument("repo")
    put_recipe.add_argument("--file", metavar="PATH", help="read the TOML from this file")
    put_recipe.add_argument("--as", dest="as_user", metavar="USER")

    secret = areas.add_parser("secret", help="repository secrets").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    put = command_parser(
        secret, "set", secret_put, "store a secret (value read from stdin or --from-env)"
    )
    put.add_argument("repo")
    put.add_argument("name")
    put.add_argument("--scope", choices=RepositorySecret.Scope.values, default="setup_start")
    put.add_argument("--from-env", metavar="VAR", help="read the value from this variable")
    put.add_argument("--as", dest="as_user", metavar="USER")
    names = command_parser(secret, "list", secret_list, "list a repository's secrets (names only)")
    names.add_argument("repo")
    remove = command_parser(secret, "delete", secret_remove, "delete a secret")
    remove.add_argument("repo")
    remove.add_argument("name")
    remove.add_argument("--as", dest="as_user", metavar="USER")


def _toml_input(options) -> str:
    if not options["file"]:
        return sys.stdin.read()
    try:
        with open(options["file"], encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from None


def policy_show(command, options) -> int:
    repository = repository_named(options["repo"])
    row = ApprovalPolicy.objects.filter(repository=repository).first()
    if row is None:
        command.stdout.write(f"# {repository.name} has no policy of its own; the default is:")
        command.stdout.write(default_policy_text())
    else:
        command.stdout.write(row.text.rstrip("\n"))
    return 0


def default_policy_text() -> str:
    """The default policy as TOML (what `policy show` prints and the settings page starts from)."""
    p = DEFAULT_POLICY

    def strings(values) -> str:
        return "[" + ", ".join(f'"{v}"' for v in values) + "]"

    return (
        f"require = {strings(p.require)}\n"
        f"irreversible_commands = {strings(p.irreversible_commands)}\n"
        f"protected_branches = {strings(p.protected_branches)}\n"
        f"expire_hours = {p.expire_hours}\n"
        f"wait_seconds = {p.wait_seconds}"
    )


def policy_put(command, options) -> int:
    repository = repository_named(options["repo"])
    try:
        change = policy_set(
            repository=repository, text=_toml_input(options), by=user_named(options["as_user"])
        )
    except PolicyError as exc:
        raise CommandError(f"{exc}; the policy of {repository.name} is unchanged") from None
    except PermissionDenied as exc:
        raise CommandError(str(exc)) from None
    if change.approval is None:
        command.stdout.write(f"approval policy of {repository.name} saved (audited)")
    else:
        command.stdout.write(
            f"this loosens the policy ({'; '.join(change.loosens)}): approval "
            f"{change.approval.pk} is pending, waiting for a reviewer other than you; the policy "
            f"of {repository.name} is unchanged until then: "
            f"{settings.PUBLIC_URL}{reverse('approvals:detail', args=[change.approval.pk])}"
        )
    return 0


def recipe_show(command, options) -> int:
    repository = repository_named(options["repo"])
    override = repository.recipe_override.strip()
    command.stdout.write(override or f"# {repository.name} has no recipe override")
    try:
        egress = current_recipe(repository).egress
    except RecipeError as exc:
        raise CommandError(str(exc)) from None
    domains = f" ({', '.join(egress.domains)})" if egress.domains else ""
    command.stdout.write(f"# egress in force: {egress.mode}{domains}")
    return 0


def recipe_put(command, options) -> int:
    repository = repository_named(options["repo"])
    try:
        pending = recipe_override_set(
            repository=repository, text=_toml_input(options), by=user_named(options["as_user"])
        )
    except RecipeError as exc:
        raise CommandError(f"{exc}; the recipe of {repository.name} is unchanged") from None
    except PermissionDenied as exc:
        raise CommandError(str(exc)) from None
    if pending is None:
        command.stdout.write(f"recipe of {repository.name} saved (audited)")
    else:
        command.stdout.write(
            f"this widens egress ({gate.summary(pending)}): approval {pending.pk} is pending; "
            "it applies once another reviewer approves it"
        )
    return 0


def secret_put(command, options) -> int:
    if options["from_env"]:
        value = os.environ.get(options["from_env"], "")
    else:
        value = sys.stdin.read().rstrip("\n")
    try:
        secret_set(
            repository=repository_named(options["repo"]),
            name=options["name"],
            value=value,
            scope=options["scope"],
            by=user_named(options["as_user"]),
        )
    except (SecretsUnavailable, PermissionDenied) as exc:
        raise CommandError(str(exc)) from None
    except ValidationError as exc:
        raise CommandError("; ".join(exc.messages)) from None
    command.stdout.write(
        f"secret {options['name']} of {options['repo']} stored ({options['scope']})"
    )
    return 0


def secret_list(command, options) -> int:
    for row in RepositorySecret.objects.filter(repository=repository_named(options["repo"])):
        used = f"{row.last_used_at:%Y-%m-%d %H:%M}" if row.last_used_at else "never"
        command.stdout.write(
            f"{row.name}  {row.scope}  updated {row.updated_at:%Y-%m-%d %H:%M}  last used {used}"
        )
    return 0


def secret_remove(command, options) -> int:
    try:
        found = secret_delete(
            repository=repository_named(options["repo"]),
            name=options["name"],
            by=user_named(options["as_user"]),
        )
    except PermissionDenied as exc:
        raise CommandError(str(exc)) from None
    if not found:
        raise CommandError(f"{options['repo']} has no secret named {options['name']!r}")
    command.stdout.write(f"secret {options['name']} of {options['repo']} deleted")
    return 0
