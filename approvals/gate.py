"""The approval gate (DESIGN.md invariant 4): request, decide, execute — each once.

- `request_approval` records a pending request (idempotent by key), tells the session's viewers
  and audits it (whether an action needs one is approvals.policy's `approval_required`).
- `approval_decide` is the one place a decision is made: a member whose role may decide, who
  contributed nothing to the change (approvals.four_eyes), on a request that is still pending
  and not expired. Compare-and-set on the state, so a replayed decision changes nothing.
- `execute_approval` runs on a worker (approvals.tasks): it claims the approved request, calls
  the action's executor (`register_executor`) and records the result. An executor raises
  `ActionNoLongerApplies` when the world moved on (the PR is already merged): the request ends
  `failed` with that reason.
- Actions the agent's own turn carries out (an irreversible command) have no executor: the turn
  waits (`wait_for_decision`), runs the command and records the result (`record_execution`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery import current_app
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from accounts import access, roles
from approvals import audit
from approvals.four_eyes import decider_conflict
from approvals.models import ApprovalRequest
from approvals.policy import policy_for
from approvals.policy_rules import IRREVERSIBLE_COMMAND

log = logging.getLogger(__name__)
# Sent inside the deciding transaction (approval=, user=, approve=): what else a decision means,
# e.g. a merge decided in the dashboard is a review of a local pull request (sessions.pulls).
approval_decided = Signal()
# Sent whenever a session's request is made, decided, expired or carried out, inside the same
# transaction (approval=, payload=): the session's log records it as an `approval` event, so
# every viewer's approvals panel updates (sessions.approval_events).
approval_changed = Signal()

State = ApprovalRequest.State
Executor = Callable[[ApprovalRequest], dict[str, Any] | None]
IN_TURN_ACTIONS = frozenset({IRREVERSIBLE_COMMAND})
# An execution claimed this long ago and not finished belongs to a worker that died; executors
# are idempotent (they get the request's idempotency key), so it may be claimed again.
STALE_CLAIM = timedelta(minutes=15)

_executors: dict[str, Executor] = {}


# The worker task that carries out an approved request (approvals.tasks).
EXECUTE_TASK = "approvals.tasks.execute_approval_task"


class ApprovalError(Exception):
    """A decision that cannot be made (no longer pending, expired); the message says why."""


class ActionNoLongerApplies(Exception):
    """Raised by an executor when the approved action makes no sense any more."""


def register_executor(action: str, executor: Executor) -> None:
    """Name the function that carries out `action` once approved. It gets the request
    (payload, repository, session, idempotency_key), returns a JSON-able result, and raises
    ActionNoLongerApplies when there is nothing left to do."""
    _executors[action] = executor


def executor_for(action: str) -> Executor | None:
    return _executors.get(action)


def _username(user) -> str:
    return user.get_username() if user is not None else "the agent"


def _tell(approval: ApprovalRequest, **extra: Any) -> None:
    """Tell the session what happened to its request (`approval_changed`)."""
    if approval.session_id is None:
        return
    payload = {
        "approval": approval.pk,
        "action": approval.action,
        "state": approval.state,
        "summary": summary(approval),
        **extra,
    }
    approval_changed.send(ApprovalRequest, approval=approval, payload=payload)


def summary(approval: ApprovalRequest) -> str:
    """One line saying what would happen."""
    payload = approval.payload or {}
    text = payload.get("summary") or payload.get("command") or ""
    if not text and payload.get("branch") and payload.get("base"):
        # A merge: which branch goes where, and what it is.
        text = f"{payload['branch']} → {payload['base']}"
        if payload.get("title"):
            text += f" ({payload['title']})"
    return f"{approval.action}: {text}" if text else approval.action


def request_approval(
    *,
    action: str,
    payload: dict[str, Any],
    session=None,
    repository=None,
    requested_by=None,
    prompt_author=None,
    idempotency_key: str | None = None,
) -> ApprovalRequest:
    """A pending request for `action` (or the one already made with `idempotency_key`).

    `requested_by` None means the session's agent; `prompt_author` is the person whose prompt
    led to it (neither may approve it)."""
    if session is not None:
        repository = session.repository
    if repository is None:
        raise ValueError("an approval request needs a session or a repository")
    if idempotency_key:
        found = ApprovalRequest.objects.filter(idempotency_key=idempotency_key).first()
        if found is not None:
            return found
    policy = policy_for(repository)
    try:
        with transaction.atomic():
            approval = ApprovalRequest.objects.create(
                repository=repository,
                session=session,
                action=action,
                payload=payload,
                idempotency_key=idempotency_key or None,
                requested_by=requested_by,
                prompt_author=prompt_author,
                expires_at=timezone.now() + timedelta(hours=policy.expire_hours),
            )
            audit.record(
                "approval.request",
                actor=requested_by,
                actor_kind=None if requested_by else audit.AuditEntry.ActorKind.AGENT,
                repository=repository,
                session=session,
                object_type="approval",
                object_id=approval.pk,
                data={"action": action, "payload": payload},
            )
            _tell(approval, requested_by=_username(requested_by))
    except IntegrityError:
        # Another worker made the same request first.
        return ApprovalRequest.objects.get(idempotency_key=idempotency_key)
    return approval


def approval_decide(
    *, approval: ApprovalRequest, user, approve: bool, reason: str = ""
) -> ApprovalRequest:
    """Approve or reject a pending request as `user`.

    PermissionDenied: the user's role may not decide, or they contributed to what it would
    carry out (approvals.four_eyes: they asked for it, prompted or typed in its session, or
    authored one of its commits). ApprovalError: it is no longer pending (decided already: a
    replay) or expired.
    """
    access.require_repo_permission(user, approval.repository, roles.DECIDE_APPROVAL)
    conflict = decider_conflict(user, approval)
    if conflict is not None:
        raise PermissionDenied(conflict)
    now = timezone.now()
    if approval.expires_at is not None and approval.expires_at <= now:
        _expire(approval)
        raise ApprovalError(
            f"approval {approval.pk} expired at {approval.expires_at:%Y-%m-%d %H:%M} UTC; "
            "ask for the action again"
        )
    state = State.APPROVED if approve else State.REJECTED
    with transaction.atomic():
        decided = ApprovalRequest.objects.filter(
            pk=approval.pk, state=State.PENDING, expires_at__gt=now
        ).update(state=state, decided_by=user, decided_at=now, reason=reason)
        if not decided:
            approval.refresh_from_db()
            raise ApprovalError(
                f"approval {approval.pk} is already {approval.state}; nothing to decide"
            )
        approval.refresh_from_db()
        audit.record(
            f"approval.{'approve' if approve else 'reject'}",
            actor=user,
            repository=approval.repository,
            session=approval.session,
            object_type="approval",
            object_id=approval.pk,
            data={"action": approval.action, "reason": reason},
        )
        _tell(approval, decided_by=user.get_username(), reason=reason)
        approval_decided.send(ApprovalRequest, approval=approval, user=user, approve=approve)
        if approve and approval.action not in IN_TURN_ACTIONS:
            pk = approval.pk
            # By name: approvals.tasks wraps this module (importing it here would be a cycle).
            transaction.on_commit(lambda: current_app.send_task(EXECUTE_TASK, args=(pk,)))
    return approval


def _expire(approval: ApprovalRequest, why: str = "") -> bool:
    with transaction.atomic():
        if not ApprovalRequest.objects.filter(pk=approval.pk, state=State.PENDING).update(
            state=State.EXPIRED, reason=why or "not decided in time"
        ):
            approval.refresh_from_db()
            return False
        approval.refresh_from_db()
        audit.record(
            "approval.expire",
            repository=approval.repository,
            session=approval.session,
            object_type="approval",
            object_id=approval.pk,
            data={"action": approval.action, "reason": approval.reason},
        )
        _tell(approval, reason=approval.reason)
    return True


def expire_overdue() -> int:
    """Expire every pending request past its expiry; returns how many."""
    overdue = ApprovalRequest.objects.filter(state=State.PENDING, expires_at__lte=timezone.now())
    return sum(_expire(a) for a in overdue.select_related("repository", "session"))


def _finish(approval: ApprovalRequest, *, ok: bool, result: dict[str, Any], actor=None) -> None:
    state = State.EXECUTED if ok else State.FAILED
    with transaction.atomic():
        ApprovalRequest.objects.filter(pk=approval.pk, state=State.APPROVED).update(
            state=state, result=result, executed_at=timezone.now()
        )
        approval.refresh_from_db()
        audit.record(
            "approval.execute" if ok else "approval.fail",
            actor=actor,
            actor_kind=None if actor else audit.AuditEntry.ActorKind.SYSTEM,
            repository=approval.repository,
            session=approval.session,
            object_type="approval",
            object_id=approval.pk,
            data={"action": approval.action, "result": result},
        )
        _tell(approval, result=result)


def execute_approval(approval_id: int) -> str:
    """Carry out an approved request once; returns the request's final state (or why nothing
    was done). Safe to call twice: the second call finds no claimable request."""
    now = timezone.now()
    claimed = (
        ApprovalRequest.objects.filter(pk=approval_id, state=State.APPROVED)
        .exclude(action__in=IN_TURN_ACTIONS)
        .filter(
            Q(execution_started_at__isnull=True) | Q(execution_started_at__lt=now - STALE_CLAIM)
        )
        .update(execution_started_at=now)
    )
    if not claimed:
        return "nothing to execute"
    approval = ApprovalRequest.objects.select_related("repository", "session").get(pk=approval_id)
    executor = executor_for(approval.action)
    if executor is None:
        _finish(
            approval,
            ok=False,
            result={"error": f"this deployment has no executor for {approval.action!r}"},
        )
        return approval.state
    try:
        result = executor(approval) or {}
    except ActionNoLongerApplies as exc:
        _finish(approval, ok=False, result={"error": str(exc), "no_longer_applies": True})
    except Exception as exc:
        log.exception("executing approval %s (%s) failed", approval.pk, approval.action)
        _finish(approval, ok=False, result={"error": f"{exc.__class__.__name__}: {exc}"})
    else:
        _finish(approval, ok=True, result=result)
    return approval.state


def record_execution(approval: ApprovalRequest, *, ok: bool, result: dict[str, Any]) -> None:
    """Record the result of an action the agent's turn carried out itself."""
    _finish(approval, ok=ok, result=result)


def wait_for_decision(
    approval: ApprovalRequest,
    *,
    timeout: float,
    stopped: threading.Event | None = None,
    poll: float = 0.5,
) -> ApprovalRequest:
    """Block until `approval` is decided, `timeout` seconds pass (it is then expired, so nobody
    approves what nothing waits for) or `stopped` is set (it stays pending). Returns it fresh."""
    deadline = time.monotonic() + timeout
    while True:
        approval.refresh_from_db()
        if approval.state != State.PENDING:
            return approval
        if stopped is not None and stopped.is_set():
            return approval
        if time.monotonic() >= deadline or (
            approval.expires_at is not None and approval.expires_at <= timezone.now()
        ):
            _expire(approval, f"nothing was decided within {timeout:.0f} s; the turn went on")
            return approval
        if stopped is not None:
            stopped.wait(poll)
        else:
            time.sleep(poll)
