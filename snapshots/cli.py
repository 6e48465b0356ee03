"""`manage.py inspect repo|snapshot|sandbox …`."""

from __future__ import annotations

import json
import sys
import time

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from accounts.identity import user_named
from accounts.models import Role
from inspect_web.cli_args import command_parser
from inspect_web.text import inert
from snapshots import members_cli, mirror
from snapshots.build import snapshot_build
from snapshots.garbage import collect_snapshot_garbage
from snapshots.models import Repository, Snapshot
from snapshots.repositories import (
    RepositoryRefused,
    repository_add,
    repository_archive,
    repository_set_branch,
)
from snapshots.restore import NoSnapshot, restore_sandbox
from snapshots.sandbox import SandboxError


def register(areas, command) -> None:
    repo = areas.add_parser("repo", help="repositories").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    add = command_parser(repo, "add", repo_add, "add a repository (any git URL or local path)")
    add.add_argument("name")
    add.add_argument("--url", required=True)
    add.add_argument(
        "--branch", help="the branch sessions start from (default: the remote's default branch)"
    )
    add.add_argument(
        "--member",
        action="append",
        default=[],
        metavar="USER[:ROLE]",
        help="add a member (role: engineer, reviewer, manager, admin; default admin). "
        "Without any, every superuser becomes an admin member.",
    )
    command_parser(repo, "list", repo_list, "list repositories").add_argument(
        "--json", action="store_true"
    )
    branch = command_parser(
        repo, "branch", repo_branch, "change the branch new sessions and builds start from"
    )
    branch.add_argument("name")
    branch.add_argument("branch")
    branch.add_argument("--as", dest="as_user", metavar="USER")
    archive = command_parser(
        repo, "archive", repo_archive, "archive a repository (no new sessions or refreshes)"
    )
    archive.add_argument("name")
    archive.add_argument("--undo", action="store_true", help="unarchive it")
    archive.add_argument("--as", dest="as_user", metavar="USER")
    members_cli.register(areas, command)

    snapshot = areas.add_parser("snapshot", help="repository snapshots").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    refresh = command_parser(
        snapshot, "refresh", snapshot_refresh, "build a snapshot now and wait for it"
    )
    refresh.add_argument("name")
    refresh.add_argument("--branch")
    refresh.add_argument("--json", action="store_true")
    refresh.add_argument(
        "--full",
        action="store_true",
        help="rebuild from scratch (no incremental layer, even when nothing changed)",
    )
    listing = command_parser(snapshot, "list", snapshot_list, "list snapshots")
    listing.add_argument("name", nargs="?")
    listing.add_argument("--json", action="store_true")
    command_parser(snapshot, "gc", snapshot_gc, "delete snapshots nobody needs")

    sandbox = areas.add_parser("sandbox", help="sandboxes").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    run = command_parser(
        sandbox, "exec", sandbox_exec, "restore the newest snapshot and run a command"
    )
    run.add_argument("name")
    run.add_argument("--json", action="store_true", help="print timings as JSON after the output")
    run.add_argument("--branch")
    run.add_argument("argv", nargs="+", metavar="CMD")


def repository_named(name: str) -> Repository:
    """The repository called `name`; CommandError lists the known ones."""
    try:
        return Repository.objects.get(name=name)
    except Repository.DoesNotExist:
        known = ", ".join(Repository.objects.values_list("name", flat=True)) or "none yet"
        raise CommandError(f"no repository named {name!r} (known: {known})") from None


def repo_add(command, options) -> int:
    members = _members(options["member"])
    try:
        repository = repository_add(
            name=options["name"],
            url=options["url"],
            branch=options["branch"],
            members=members,
            by=None,  # the operator at the host's shell: audited as the system
        )
    except RepositoryRefused as exc:
        raise CommandError(f"{exc}; the repository was not added") from None
    command.stdout.write(
        f"added repository {repository.name} ({repository.url}, branch {repository.default_branch})"
    )
    for user, role in members:
        command.stdout.write(f"  {user.get_username()} is {role}")
    return 0


def repo_branch(command, options) -> int:
    repository = repository_named(options["name"])
    try:
        repository_set_branch(repository, options["branch"], by=user_named(options["as_user"]))
    except RepositoryRefused as exc:
        raise CommandError(
            f"{exc}; the default branch is still {repository.default_branch}"
        ) from None
    command.stdout.write(f"{repository.name}: new sessions start from {options['branch']}")
    return 0


def repo_archive(command, options) -> int:
    repository = repository_named(options["name"])
    undo = options["undo"]
    repository_archive(repository, by=user_named(options["as_user"]), undo=undo)
    command.stdout.write(f"{repository.name} is {'active' if undo else 'archived'}")
    return 0


def _members(specs: list[str]):
    users = get_user_model()
    if not specs:
        return [(user, Role.ADMIN) for user in users.objects.filter(is_superuser=True)]
    members = []
    for spec in specs:
        username, _, role = spec.partition(":")
        role = role or Role.ADMIN
        if role not in Role.values:
            raise CommandError(f"--member {spec}: unknown role {role!r} ({', '.join(Role.values)})")
        user = users.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"--member {spec}: no user named {username!r}")
        members.append((user, role))
    return members


def repo_list(command, options) -> int:
    rows = [
        {
            "name": r.name,
            "url": r.url,
            "branch": r.default_branch,
            "archived": r.archived_at is not None,
        }
        for r in Repository.objects.all()
    ]
    if options["json"]:
        command.stdout.write(json.dumps(rows))
    else:
        for row in rows:
            archived = " (archived)" if row["archived"] else ""
            command.stdout.write(f"{row['name']:<24} {row['branch']:<16} {row['url']}{archived}")
    return 0


def _snapshot_json(snapshot: Snapshot) -> dict:
    return {
        "id": snapshot.pk,
        "repository": snapshot.repository.name,
        "branch": snapshot.branch,
        "commit": snapshot.commit,
        "state": snapshot.state,
        "backend": snapshot.backend,
        "build_seconds": snapshot.build_seconds,
        "size_bytes": snapshot.size_bytes,
        "file_count": snapshot.file_count,
        "error": snapshot.error,
        "kind": snapshot.kind,
        "parent": snapshot.parent_id,
        "layer_depth": snapshot.layer_depth,
        "added_bytes": snapshot.added_bytes,
        "created_at": snapshot.created_at.isoformat(),
        "checked_at": snapshot.checked_at.isoformat() if snapshot.checked_at else None,
    }


def snapshot_refresh(command, options) -> int:
    repository = repository_named(options["name"])
    # The build log is the repository's own output: printed inert, like every untrusted text.
    echo = None if options["json"] else (lambda line: command.stdout.write(inert(line)))
    snapshot = snapshot_build(
        repository, branch=options["branch"], echo=echo, full=options.get("full", False)
    )
    data = _snapshot_json(snapshot)
    if options["json"]:
        command.stdout.write(json.dumps(data))
    else:
        command.stdout.write(
            f"snapshot {data['id']} {data['state']} ({_kind(snapshot)}): commit "
            f"{data['commit'][:12]}, {data['build_seconds']} s, {data['size_bytes']} bytes, "
            f"{data['file_count']} files"
        )
    if snapshot.state != Snapshot.State.READY:
        command.stderr.write(f"build failed: {snapshot.error}")
        return 1
    return 0


def _kind(snapshot: Snapshot) -> str:
    """How the snapshot came about, as the CLI and the Snapshots page say it."""
    if snapshot.kind == Snapshot.Kind.INCREMENTAL:
        text = f"incremental on #{snapshot.parent_id}, {snapshot.layer_depth} layers"
    else:
        text = f"full, {snapshot.layer_depth} layers"
    if snapshot.checked_at:
        text += f"; unchanged at the check of {snapshot.checked_at:%Y-%m-%d %H:%M:%S}"
    return text


def snapshot_list(command, options) -> int:
    snapshots = Snapshot.objects.select_related("repository")
    if options["name"]:
        snapshots = snapshots.filter(repository=repository_named(options["name"]))
    rows = [_snapshot_json(s) for s in snapshots[:200]]
    if options["json"]:
        command.stdout.write(json.dumps(rows))
        return 0
    for row in rows:
        command.stdout.write(
            f"{row['id']:>5} {row['repository']:<20} {row['branch']:<12} {row['commit'][:10]:<10} "
            f"{row['state']:<10} {row['build_seconds'] or '':>8} {row['kind']:<11} "
            f"{row['checked_at'] or '':<25} {row['error'][:60]}"
        )
    return 0


def snapshot_gc(command, options) -> int:
    deleted = collect_snapshot_garbage()
    command.stdout.write(f"deleted {len(deleted)} snapshots" + (f": {deleted}" if deleted else ""))
    return 0


def sandbox_exec(command, options) -> int:
    repository = repository_named(options["name"])
    argv = options["argv"]
    started = time.perf_counter()
    try:
        restored = restore_sandbox(repository, branch=options["branch"])
    except (NoSnapshot, SandboxError, mirror.MirrorError) as exc:
        raise CommandError(str(exc)) from None
    sandbox = restored.sandbox
    try:
        exec_started = time.perf_counter()
        handle = sandbox.exec(argv if len(argv) > 1 else argv[0], cwd="/workspace")
        for line in handle:
            stream = sys.stdout if line.stream == "stdout" else sys.stderr
            stream.write(line.text + "\n")
            stream.flush()
        result = handle.wait()
        exec_ms = (time.perf_counter() - exec_started) * 1000
    finally:
        sandbox.terminate()
    if result.limit_hit:
        command.stderr.write(f"the command hit its {result.limit_hit} limit")
    if options["json"]:
        timings = {
            **restored.timings,
            "exec_ms": round(exec_ms, 2),
            "total_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        command.stdout.write(
            json.dumps(
                {
                    "exit_code": result.exit_code,
                    "snapshot": restored.snapshot.pk,
                    "commit": restored.commit,
                    "drift_commits": restored.drift_commits,
                    **timings,
                }
            )
        )
    return result.exit_code
