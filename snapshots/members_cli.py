"""`manage.py inspect member add|role|remove|list|invite`: a repository's people, through the
same actions as Settings › People (snapshots.members), audited as the `--as` user (default: the
first site admin)."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from accounts.identity import user_named
from accounts.models import Role
from inspect_web.cli_args import command_parser
from snapshots.members import (
    MemberRefused,
    invite,
    member_add,
    member_remove,
    member_set_role,
    members_of,
    pending_invitations,
)
from snapshots.models import Repository


def register(areas, command) -> None:
    member = areas.add_parser("member", help="a repository's members").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    add = command_parser(member, "add", member_add_cmd, "make a user a member with a role")
    add.add_argument("repo")
    add.add_argument("user")
    add.add_argument("--role", choices=Role.values, default=Role.ENGINEER)
    role = command_parser(member, "role", member_role_cmd, "change a member's role")
    role.add_argument("repo")
    role.add_argument("user")
    role.add_argument("role", choices=Role.values)
    remove = command_parser(member, "remove", member_remove_cmd, "remove a member")
    remove.add_argument("repo")
    remove.add_argument("user")
    listing = command_parser(member, "list", member_list_cmd, "list members and invitations")
    listing.add_argument("repo")
    listing.add_argument("--json", action="store_true")
    invited = command_parser(
        member,
        "invite",
        member_invite_cmd,
        "invite by username or e-mail (an address with no account gets a link, printed once)",
    )
    invited.add_argument("repo")
    invited.add_argument("who", metavar="USER_OR_EMAIL")
    invited.add_argument("--role", choices=Role.values, default=Role.ENGINEER)
    for parser in (add, role, remove, invited):
        parser.add_argument("--as", dest="as_user", metavar="USER")


def _repository(name: str) -> Repository:
    repository = Repository.objects.filter(name=name).first()
    if repository is None:
        known = ", ".join(Repository.objects.values_list("name", flat=True)) or "none yet"
        raise CommandError(f"no repository named {name!r} (known: {known})")
    return repository


def _user(name: str):
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        raise CommandError(f"no user named {name!r}")
    return user


def member_add_cmd(command, options) -> int:
    repository, user = _repository(options["repo"]), _user(options["user"])
    try:
        member_add(repository, user, options["role"], by=user_named(options["as_user"]))
    except MemberRefused as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(f"{user.get_username()} is {options['role']} on {repository.name}")
    return 0


def member_role_cmd(command, options) -> int:
    repository, user = _repository(options["repo"]), _user(options["user"])
    try:
        member_set_role(repository, user, options["role"], by=user_named(options["as_user"]))
    except MemberRefused as exc:
        raise CommandError(f"{exc}; nothing changed") from None
    command.stdout.write(f"{user.get_username()} is {options['role']} on {repository.name}")
    return 0


def member_remove_cmd(command, options) -> int:
    repository, user = _repository(options["repo"]), _user(options["user"])
    try:
        member_remove(repository, user, by=user_named(options["as_user"]))
    except MemberRefused as exc:
        raise CommandError(f"{exc}; nothing changed") from None
    command.stdout.write(f"{user.get_username()} is no longer a member of {repository.name}")
    return 0


def member_list_cmd(command, options) -> int:
    repository = _repository(options["repo"])
    members = [{"user": m.user.get_username(), "role": m.role} for m in members_of(repository)]
    pending = [
        {"email": i.email, "role": i.role, "expires": i.expires.isoformat()}
        for i in pending_invitations(repository)
    ]
    if options["json"]:
        command.stdout.write(json.dumps({"members": members, "invitations": pending}))
        return 0
    for row in members:
        command.stdout.write(f"{row['user']:<24} {row['role']}")
    for row in pending:
        command.stdout.write(f"{row['email']:<24} {row['role']} (invited, until {row['expires']})")
    return 0


def member_invite_cmd(command, options) -> int:
    repository = _repository(options["repo"])
    try:
        invited = invite(
            repository, options["who"], options["role"], by=user_named(options["as_user"])
        )
    except MemberRefused as exc:
        raise CommandError(f"{exc}; nothing changed") from None
    if invited.membership is not None:
        member = invited.membership
        command.stdout.write(f"{member.user.get_username()} is {member.role} on {repository.name}")
    else:
        command.stdout.write(
            f"invited {invited.invitation.email} as {invited.invitation.role}; the link "
            f"(mailed, shown only now): {invited.link}"
        )
    return 0
