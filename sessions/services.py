"""Session actions: every state change goes through one of these (views, consumers, tasks, the
API and the CLI all call them)."""

from __future__ import annotations

from celery import current_app
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from accounts import access, roles
from inspect_web.redis_client import get_redis
from sessions import model_access, states
from sessions.agents import AgentError, validate_agent
from sessions.events import append_event
from sessions.models import Prompt, Session, State
from snapshots.models import Repository
from snapshots.repositories import archived_refusal

MAX_PROMPT_BYTES = 100_000
STOP_KEY = "inspect:stop:{}"
RUN_TASK = "sessions.tasks.run_session"
NO_MORE_PROMPTS = {State.MERGED, State.CLOSED, State.CANCELLED}
# Who may start a review session: engineers and admins (they start sessions) and reviewers.
REVIEW_PERMISSIONS = (roles.START_SESSION, roles.DECIDE_APPROVAL)
# Sent by session_transition (session=, previous=, state=) inside the caller's transaction;
# receivers (automations, Slack) defer their work with transaction.on_commit.
session_state_changed = Signal()


class SessionError(Exception):
    """A request about a session that cannot be honoured; the message says why."""


def _check_prompt(text: str) -> str:
    text = (text or "").strip()
    if not text:
        raise SessionError("the prompt is empty; say what the agent should do")
    size = len(text.encode())
    if size > MAX_PROMPT_BYTES:
        raise SessionError(
            f"the prompt is {size:,} bytes; the limit is {MAX_PROMPT_BYTES:,} — attach long "
            "material as a file in the repository instead"
        )
    return text


def session_transition(
    session: Session, target: str, *, fence: int | None = None, reason: str = ""
) -> None:
    """Move `session` to `target` if the table allows it (compare-and-set on the current state
    and, for a driver, on its fencing token); records a `state` event."""
    current = session.state
    states.check_transition(current, target)
    rows = Session.objects.filter(pk=session.pk, state=current)
    if fence is not None:
        rows = rows.filter(driver_fence=fence)
    if not rows.update(state=target, updated_at=timezone.now()):
        session.refresh_from_db(fields=["state", "driver_fence"])
        raise states.IllegalTransition(session.state, target)
    session.state = target
    if target != State.RUNNING:
        # Model access lives only while the agent runs: every other state ends it (a turn's
        # end, a stop, a failure, a lost driver's turn resumed, the session's end).
        model_access.revoke(session.pk)
    payload = {"from": current, "to": target}
    if reason:
        payload["reason"] = reason
    append_event(session.pk, "state", payload)
    session_state_changed.send_robust(Session, session=session, previous=current, state=target)


def _enqueue(session_id: int) -> None:
    # By name: the task runs the runner, which changes state through this module.
    transaction.on_commit(lambda: current_app.send_task(RUN_TASK, args=(session_id,)))


def default_agent(repository: Repository, *, agent_command: str = "") -> str:
    """The agent a session gets when none is named: the command agent when a command is given,
    else the repository's default, else the site's."""
    if agent_command:
        return "command"
    return repository.default_agent or settings.DEFAULT_AGENT


def session_create(
    *,
    repository: Repository,
    creator,
    prompt: str,
    agent: str = "",
    agent_command: str = "",
    model: str = "",
    branch: str | None = None,
    title: str = "",
    parent: Session | None = None,
    purpose: str = Session.Purpose.WORK,
    reviewed_pull_request=None,
    reviewed_commit: str = "",
) -> Session:
    """Start a session with its first prompt; the turn is queued for a worker after commit.
    A `review` session (sessions/review_agent.py) may also be started by a reviewer."""
    if purpose == Session.Purpose.REVIEW:
        if not any(access.has_repo_permission(creator, repository, p) for p in REVIEW_PERMISSIONS):
            raise PermissionDenied(
                f"only engineers, reviewers and admins of {repository.name} may ask for a review"
            )
    else:
        access.require_repo_permission(creator, repository, roles.START_SESSION)
    if refusal := archived_refusal(repository):
        raise SessionError(refusal)
    if parent is not None and parent.purpose == Session.Purpose.REVIEW:
        # Its child would be a work session that publishes: read-only would be one call away.
        raise SessionError(
            f"session {parent.pk} is a read-only review session: it cannot start other sessions"
        )
    text = _check_prompt(prompt)
    agent = agent or default_agent(repository, agent_command=agent_command)
    if not model and agent != "command":  # the command agent asks no model
        model = repository.default_model
    try:
        validate_agent(agent, agent_command, model=model, backend=settings.SANDBOX_BACKEND)
    except AgentError as exc:
        raise SessionError(str(exc)) from None
    with transaction.atomic():
        session = Session.objects.create(
            repository=repository,
            creator=creator,
            title=(title or text.splitlines()[0])[:200],
            branch=branch or repository.default_branch,
            agent=agent,
            agent_command=agent_command,
            model=model,
            parent=parent,
            purpose=purpose,
            reviewed_pull_request=reviewed_pull_request,
            reviewed_commit=reviewed_commit,
        )
        _add_prompt(session, creator, text)
    return session


def prompt_queue(*, session: Session, author, text: str, origin: str = "") -> Prompt:
    """Queue a prompt; it runs after the turns before it, in order, attributed to `author`
    (with `origin` set, asked by the system on `author`'s behalf: Prompt.Origin)."""
    access.require_repo_permission(author, session.repository, roles.PROMPT_SESSION)
    text = _check_prompt(text)
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        if locked.state in NO_MORE_PROMPTS:
            raise SessionError(
                f"session {session.pk} is {locked.get_state_display().lower()}; "
                "start a new session instead"
            )
        return _add_prompt(locked, author, text, origin=origin)


def _add_prompt(session: Session, author, text: str, *, origin: str = "") -> Prompt:
    last = session.prompts.order_by("-order").values_list("order", flat=True).first() or 0
    prompt = Prompt.objects.create(
        session=session, author=author, text=text, order=last + 1, origin=origin
    )
    payload = {"prompt": prompt.pk, "order": prompt.order, "author": author.get_username(),
               "text": text}  # fmt: skip
    if origin:
        payload["origin"] = origin
    append_event(session.pk, "prompt", payload)
    _enqueue(session.pk)
    return prompt


def session_stop(*, session: Session, user) -> bool:
    """Ask the driver to stop the running turn; False if no turn is running."""
    access.require_repo_permission(user, session.repository, roles.STOP_SESSION)
    session.refresh_from_db(fields=["state"])
    if session.state not in states.ACTIVE and session.state != State.QUEUED:
        return False
    get_redis().set(STOP_KEY.format(session.pk), user.get_username(), ex=3600)
    model_access.revoke(session.pk)  # the agent's next model call is refused at once
    append_event(session.pk, "stop_requested", {"by": user.get_username()})
    return True


def stop_requested(session_id: int) -> str | None:
    value = get_redis().get(STOP_KEY.format(session_id))
    return value.decode() if value else None


def clear_stop(session_id: int) -> None:
    get_redis().delete(STOP_KEY.format(session_id))
