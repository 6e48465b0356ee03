"""`manage.py inspect doctor|session …`: what this machine can run, and start, prompt, stop
and read sessions from the shell."""

from __future__ import annotations

import json
import time

from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError

from accounts import access
from accounts.identity import user_named
from inspect_web.celery import app
from inspect_web.cli_args import command_parser
from inspect_web.text import inert
from sessions import services
from sessions.agents import doctor as agents_doctor
from sessions.models import Session, State
from sessions.runner import drive_session
from sessions.stream.read import events_after, serialize
from snapshots.backends import sandbox_backend
from snapshots.models import Repository

WAIT_DONE = {State.IDLE, State.FAILED, State.PR_OPEN, State.MERGED, State.CLOSED, State.CANCELLED}
TIMING_KEYS = ["queue_ms", "restore_ms", "sync_ms", "first_event_ms", "turn_ms"]


def register(areas, command) -> None:
    # Before `session`: the order `inspect --help` has always listed the areas in.
    checkup = areas.add_parser(
        "doctor",
        help="what this machine's sandbox backend and agent runtimes can do",
        description="what this machine's sandbox backend and agent runtimes can do",
    )
    checkup.set_defaults(handler=doctor)
    checkup.called_from_command_line = True  # argparse errors print usage, not a traceback
    checkup.add_argument(
        "--install-agents",
        action="store_true",
        help="install the agent CLIs (the platform's pinned versions and those recipes pin) first",
    )

    session = areas.add_parser("session", help="agent sessions").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )

    def sub(name, handler, help_text):
        parser = command_parser(session, name, handler, help_text)
        parser.add_argument("--as", dest="as_user", metavar="USER", help="act as this user")
        return parser

    create = sub("create", session_create, "start a session with a first prompt")
    create.add_argument("repo")
    create.add_argument("--prompt", required=True)
    create.add_argument(
        "--agent",
        default="",
        help="default: command with --agent-command, else INSPECT_DEFAULT_AGENT",
    )
    create.add_argument("--agent-command", default="")
    create.add_argument("--model", default="", help="the model for this session's agent")
    create.add_argument("--branch")
    create.add_argument("--wait", action="store_true", help="block until idle or failed")
    create.add_argument("--inline", action="store_true", help="run the turn in this process")
    create.add_argument("--json", action="store_true")
    prompt = sub("prompt", session_prompt, "queue a follow-up prompt")
    prompt.add_argument("id", type=int)
    prompt.add_argument("text")
    prompt.add_argument("--wait", action="store_true")
    prompt.add_argument("--inline", action="store_true")
    prompt.add_argument("--json", action="store_true")
    stop = sub("stop", session_stop, "stop the running turn")
    stop.add_argument("id", type=int)
    events = sub("events", session_events, "print a session's events")
    events.add_argument("id", type=int)
    events.add_argument("--after", type=int, default=0)
    events.add_argument("--json", action="store_true")


def _session(pk: int, user) -> Session:
    session = access.visible_to(user, Session.objects.filter(pk=pk)).first()
    if session is None:
        raise CommandError(f"no session {pk} on a repository {user.get_username()} is a member of")
    return session


def session_create(command, options) -> int:
    user = user_named(options["as_user"])
    repository = Repository.objects.filter(name=options["repo"]).first()
    if repository is None:
        raise CommandError(f"no repository named {options['repo']!r}")
    try:
        session = services.session_create(
            repository=repository,
            creator=user,
            prompt=options["prompt"],
            agent=options["agent"],
            agent_command=options["agent_command"],
            model=options["model"],
            branch=options["branch"],
        )
    except (services.SessionError, PermissionDenied) as exc:
        raise CommandError(str(exc)) from None
    if not options["json"]:
        command.stdout.write(f"session {session.pk} created")
    return _finish(command, session, options)


def session_prompt(command, options) -> int:
    user = user_named(options["as_user"])
    session = _session(options["id"], user)
    try:
        prompt = services.prompt_queue(session=session, author=user, text=options["text"])
    except (services.SessionError, PermissionDenied) as exc:
        raise CommandError(str(exc)) from None
    if not options["json"]:
        command.stdout.write(f"prompt {prompt.order} queued in session {session.pk}")
    return _finish(command, session, options)


def _finish(command, session: Session, options) -> int:
    if options.get("inline"):
        _run_inline(session)
    elif options.get("wait"):
        if not app.control.ping(timeout=2):
            command.stderr.write("no Celery worker answered within 2 s; running the turn here")
            _run_inline(session)
        else:
            _wait(session)
    session.refresh_from_db()
    if options.get("json"):
        command.stdout.write(json.dumps(_summary(session)))
    elif options.get("wait") or options.get("inline"):
        command.stdout.write(f"session {session.pk} is {session.state}")
        if session.error:
            command.stderr.write(inert(session.error))
    return 1 if session.state == State.FAILED else 0


def _run_inline(session: Session) -> None:
    drive_session(session.pk)


def _wait(session: Session, timeout: float = 3600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session.refresh_from_db(fields=["state"])
        busy = session.prompts.filter(state__in=["queued", "running"]).exists()
        if session.state in WAIT_DONE and not busy:
            return
        time.sleep(0.2)
    raise CommandError(f"session {session.pk} did not finish within {timeout:.0f} s")


def _summary(session: Session) -> dict:
    diff = session.diff_stats or {}
    return {
        "id": session.pk,
        "state": session.state,
        "timings": {key: session.timings.get(key) for key in TIMING_KEYS},
        "event_count": session.events.count(),
        "diff": {
            "files": diff.get("files", 0),
            "added": diff.get("added", 0),
            "removed": diff.get("removed", 0),
            "paths": diff.get("paths", []),
        },
        "error": session.error,
    }


def session_stop(command, options) -> int:
    user = user_named(options["as_user"])
    session = _session(options["id"], user)
    try:
        stopping = services.session_stop(session=session, user=user)
    except PermissionDenied as exc:
        raise CommandError(str(exc)) from None
    if not stopping:
        raise CommandError(f"session {session.pk} has no running turn (it is {session.state})")
    command.stdout.write(f"stopping the running turn of session {session.pk}")
    return 0


def session_events(command, options) -> int:
    user = user_named(options["as_user"])
    session = _session(options["id"], user)
    if options["after"] < 0:
        raise CommandError("--after must be 0 or a positive seq")
    after = options["after"]
    while True:
        page = events_after(session.pk, after, limit=1000)
        if not page:
            return 0
        for event in page:
            if options["json"]:
                command.stdout.write(json.dumps(serialize(event)))
            else:
                brief = inert(_brief(event.payload))
                command.stdout.write(f"{event.seq:>6} {event.kind:<14} {brief}")
        after = page[-1].seq


def _brief(payload: dict) -> str:
    """A short line for an event; untrusted (agent-written) text: print it through `inert`."""
    for key in ("text", "message", "command", "path", "to"):
        if key in payload:
            return str(payload[key])[:160]
    return json.dumps(payload)[:160]


def doctor(command, options) -> int:
    failed = []
    if options.get("install_agents"):
        command.stdout.write("installing agent CLIs:")
        failed = agents_doctor.install_agents(lambda line: command.stdout.write(f"  {line}"))
    backend = sandbox_backend()
    command.stdout.write(f"sandbox backend: {backend.name}")
    for line in backend.doctor():
        command.stdout.write(f"  {line}")
    command.stdout.write("agent runtimes:")
    for line in agents_doctor.runtime_lines():
        command.stdout.write(f"  {line}")
    for failure in failed:
        command.stderr.write(f"inspect doctor: could not install {failure}")
    return 1 if failed else 0
