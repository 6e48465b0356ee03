"""`manage.py inspect audit|approval …`: the audit log and decisions from the shell (a
repository's policy, recipe and secrets: snapshots.controls_cli)."""

from __future__ import annotations

import json

from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError

from accounts import access
from accounts.identity import user_named
from approvals import audit, gate
from approvals.models import ApprovalRequest
from inspect_web.cli_args import command_parser
from inspect_web.text import inert


def register(areas, command) -> None:
    log = areas.add_parser("audit", help="the audit log").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    command_parser(
        log,
        "verify",
        audit_verify,
        "check every HMAC, the chain and its head in the sink (and on PostgreSQL the triggers); "
        "exit 1 naming what is wrong",
    )
    export = command_parser(log, "export", audit_export, "print entries as JSON lines")
    export.add_argument("--repository")
    export.add_argument("--session", type=int)
    export.add_argument("--user", help="entries whose actor is this user")
    export.add_argument("--action", help="e.g. approval.approve")
    export.add_argument("--after", type=int, default=0, help="only entries with a higher seq")

    approval = areas.add_parser("approval", help="approval requests").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    listing = command_parser(approval, "list", approval_list, "list approval requests")
    listing.add_argument("--state", default="pending")
    listing.add_argument("--json", action="store_true")
    decide = command_parser(
        approval, "decide", approval_decide, "approve or reject a pending request"
    )
    decide.add_argument("id", type=int)
    decide.add_argument("decision", choices=["approve", "reject"])
    decide.add_argument("--reason", default="")
    decide.add_argument("--as", dest="as_user", metavar="USER", help="decide as this user")


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
                f"{inert(gate.summary(approval))}  (asked by {approval.requester_label})"
            )
    return 0


def approval_decide(command, options) -> int:
    user = user_named(options["as_user"])
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
