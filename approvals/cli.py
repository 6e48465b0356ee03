"""`manage.py inspect audit|approval|policy|recipe|secret …`: the audit log, decisions, the
approval policy, the gated recipe (egress) and secrets from the shell."""

from __future__ import annotations

import json
import os
import sys

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import CommandError

from accounts import access
from approvals import audit, gate
from approvals.egress import current_recipe, recipe_override_set
from approvals.models import ApprovalPolicy, ApprovalRequest, RepositorySecret
from approvals.policy import policy_set
from approvals.policy_rules import PolicyError
from approvals.secrets import SecretsUnavailable, secret_delete, secret_set


def register(areas, command) -> None:
    def sub(parent, name, handler, help_text):
        parser = parent.add_parser(name, help=help_text, description=help_text)
        parser.set_defaults(handler=handler)
        parser.called_from_command_line = True
        return parser

    log = areas.add_parser("audit", help="the audit log").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    sub(
        log,
        "verify",
        audit_verify,
        "check every HMAC, the chain and its head in the sink (and on PostgreSQL the triggers); "
        "exit 1 naming what is wrong",
    )
    export = sub(log, "export", audit_export, "print entries as JSON lines")
    export.add_argument("--repository")
    export.add_argument("--session", type=int)
    export.add_argument("--user", help="entries whose actor is this user")
    export.add_argument("--action", help="e.g. approval.approve")
    export.add_argument("--after", type=int, default=0, help="only entries with a higher seq")

    approval = areas.add_parser("approval", help="approval requests").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    listing = sub(approval, "list", approval_list, "list approval requests")
    listing.add_argument("--state", default="pending")
    listing.add_argument("--json", action="store_true")
    decide = sub(approval, "decide", approval_decide, "approve or reject a pending request")
    decide.add_argument("id", type=int)
    decide.add_argument("decision", choices=["approve", "reject"])
    decide.add_argument("--reason", default="")
    decide.add_argument("--as", dest="as_user", metavar="USER", help="decide as this user")

    policy = areas.add_parser("policy", help="a repository's approval policy").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    show = sub(policy, "show", policy_show, "print the policy (TOML; the default if none is set)")
    show.add_argument("repo")
    put_policy = sub(policy, "set", policy_put, "replace the policy (TOML from --file or stdin)")
    put_policy.add_argument("repo")
    put_policy.add_argument("--file", metavar="PATH", help="read the TOML from this file")
    put_policy.add_argument("--as", dest="as_user", metavar="USER")

    recipe = areas.add_parser(
        "recipe", help="a repository's dashboard recipe (wider egress waits for approval)"
    ).add_subparsers(dest="action", metavar="ACTION", required=True)
    show = sub(recipe, "show", recipe_show, "print the recipe override and the egress in force")
    show.add_argument("repo")
    put_recipe = sub(recipe, "set", recipe_put, "set the override (TOML; empty clears it)")
    put_recipe.add_argument("repo")
    put_recipe.add_argument("--file", metavar="PATH", help="read the TOML from this file")
    put_recipe.add_argument("--as", dest="as_user", metavar="USER")

    secret = areas.add_parser("secret", help="repository secrets").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    put = sub(secret, "set", secret_put, "store a secret (value read from stdin or --from-env)")
    put.add_argument("repo")
    put.add_argument("name")
    put.add_argument("--scope", choices=RepositorySecret.Scope.values, default="setup_start")
    put.add_argument("--from-env", metavar="VAR", help="read the value from this variable")
    put.add_argument("--as", dest="as_user", metavar="USER")
    names = sub(secret, "list", secret_list, "list a repository's secrets (names only)")
    names.add_argument("repo")
    remove = sub(secret, "delete", secret_remove, "delete a secret")
    remove.add_argument("repo")
    remove.add_argument("name")
    remove.add_argument("--as", dest="as_user", metavar="USER")


def audit_verify(command, options) -> int:
    report = audit.verify()
    for note in report.notes:
        command.stdout.write(f"note: {note}")
    if not report.ok:
        first, *others = report.problems
        if first.seq is not None:
            command.stderr.write(f"audit log broken after {report.checked} good entries: {first}")
        else:
            command.stderr.write(f"audit log not verified: {first}")
        for problem in others:
            command.stderr.write(f"also: {problem}")
        return 1
    command.stdout.write(
        f"audit log intact: {report.checked} entries, HMAC chain verified against the sink "
        f"{audit.sink_target()}"
    )
    if report.head:
        command.stdout.write(f"head: seq {report.head[0]} hash {report.head[1]}")
    return 0


def audit_export(command, options) -> int:
    entries = audit.AuditEntry.objects.filter(seq__gt=options["after"]).order_by("seq")
    if options["repository"]:
        entries = entries.filter(repository_name=options["repository"])
    if options["session"]:
        entries = entries.filter(session_id=options["session"])
    if options["user"]:
        entries = entries.filter(actor_name=options["user"])
    if options["action"]:
        entries = entries.filter(action=options["action"])
    for entry in entries.iterator(chunk_size=2000):
        command.stdout.write(json.dumps(audit.as_json(entry), ensure_ascii=False))
    return 0


def _user(name: str | None):
    from sessions.cli import _user as user_named

    return user_named(name)


def approval_list(command, options) -> int:
    rows = ApprovalRequest.objects.select_related("repository", "requested_by")
    if options["state"] != "all":
        rows = rows.filter(state=options["state"])
    for approval in rows[:500]:
        if options["json"]:
            command.stdout.write(
                json.dumps(
                    {
                        "id": approval.pk,
                        "action": approval.action,
                        "state": approval.state,
                        "repository": approval.repository.name,
                        "session": approval.session_id,
                        "requested_by": approval.requester_label,
                        "summary": gate.summary(approval),
                    }
                )
            )
        else:
            command.stdout.write(
                f"{approval.pk:>6}  {approval.state:<9} {approval.repository.name:<20} "
                f"{gate.summary(approval)}  (asked by {approval.requester_label})"
            )
    return 0


def approval_decide(command, options) -> int:
    user = _user(options["as_user"])
    approval = (
        access.visible_to(user, ApprovalRequest.objects.select_related("repository", "session"))
        .filter(pk=options["id"])
        .first()
    )
    if approval is None:
        raise CommandError(f"no approval {options['id']} on a repository {user} is a member of")
    try:
        approval = gate.approval_decide(
            approval=approval,
            user=user,
            approve=options["decision"] == "approve",
            reason=options["reason"],
        )
    except (PermissionDenied, gate.ApprovalError) as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(f"approval {approval.pk} is {approval.state}")
    return 0


def _repository(name: str):
    from snapshots.cli import _repository as repository_named

    return repository_named(name)


def _toml_input(options) -> str:
    if not options["file"]:
        return sys.stdin.read()
    try:
        with open(options["file"], encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from None


def policy_show(command, options) -> int:
    repository = _repository(options["repo"])
    row = ApprovalPolicy.objects.filter(repository=repository).first()
    if row is None:
        command.stdout.write(f"# {repository.name} has no policy of its own; the default is:")
        command.stdout.write(_default_policy_text())
    else:
        command.stdout.write(row.text.rstrip("\n"))
    return 0


def _default_policy_text() -> str:
    from approvals.policy_rules import DEFAULT_POLICY as p

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
    repository = _repository(options["repo"])
    try:
        policy_set(repository=repository, text=_toml_input(options), by=_user(options["as_user"]))
    except PolicyError as exc:
        raise CommandError(f"{exc}; the policy of {repository.name} is unchanged") from None
    except PermissionDenied as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(f"approval policy of {repository.name} saved (audited)")
    return 0


def recipe_show(command, options) -> int:
    from snapshots.recipe import RecipeError

    repository = _repository(options["repo"])
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
    from snapshots.recipe import RecipeError

    repository = _repository(options["repo"])
    try:
        pending = recipe_override_set(
            repository=repository, text=_toml_input(options), by=_user(options["as_user"])
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
            repository=_repository(options["repo"]),
            name=options["name"],
            value=value,
            scope=options["scope"],
            by=_user(options["as_user"]),
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
    for row in RepositorySecret.objects.filter(repository=_repository(options["repo"])):
        command.stdout.write(f"{row.name}  {row.scope}  updated {row.updated_at:%Y-%m-%d %H:%M}")
    return 0


def secret_remove(command, options) -> int:
    try:
        found = secret_delete(
            repository=_repository(options["repo"]),
            name=options["name"],
            by=_user(options["as_user"]),
        )
    except PermissionDenied as exc:
        raise CommandError(str(exc)) from None
    if not found:
        raise CommandError(f"{options['repo']} has no secret named {options['name']!r}")
    command.stdout.write(f"secret {options['name']} of {options['repo']} deleted")
    return 0
