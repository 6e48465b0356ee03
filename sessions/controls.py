"""What the controls (approvals/) do to a session's event log, given the session: its
repository's secrets are scrubbed from every event before the insert, and its agent's tool calls
and sandbox commands go to the audit log once stored. Called by sessions.events; the controls
themselves never look a session up."""

from __future__ import annotations

import logging
from typing import Any

from approvals.audit import AuditEntry, record
from approvals.redaction import redact
from approvals.secrets import secret_values
from sessions.models import Session

log = logging.getLogger(__name__)

_session_repo: dict[int, int] = {}


def redact_event_payload(session_id: int, payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` with every secret value of the session's repository replaced."""
    repository_id = _repository_of(session_id)
    if repository_id is None:
        return payload
    values = secret_values(repository_id)
    return redact(payload, values) if values else payload


def _repository_of(session_id: int) -> int | None:
    if session_id not in _session_repo:
        found = Session.objects.filter(pk=session_id).values_list("repository_id", flat=True)
        repository_id = found.first()
        if repository_id is None:
            return None
        if len(_session_repo) > 10_000:
            _session_repo.clear()
        _session_repo[session_id] = repository_id  # a session never changes repository
    return _session_repo[session_id]


def record_session_actions(session_id: int, actions: list[tuple[int, str, dict]]) -> None:
    """Audit a session's tool calls and commands: (event seq, kind, stored payload) each. Best
    effort after the events are stored: a failure is logged, never raised into the producer."""
    session = Session.objects.select_related("repository").filter(pk=session_id).first()
    if session is None:
        return
    try:
        for seq, kind, payload in actions:
            if kind == "tool_call":
                action = "agent.tool_call"
                data = {"tool": payload.get("name"), "arguments": payload.get("arguments")}
            else:
                action = "sandbox.command"
                data = {k: payload.get(k) for k in ("command", "phase", "exit_code", "ok")}
            data["seq"] = seq
            data["turn"] = payload.get("turn")
            record(
                action,
                actor_kind=AuditEntry.ActorKind.AGENT if kind == "tool_call" else None,
                session=session,
                object_type="session",
                object_id=session_id,
                data=data,
            )
    except Exception:
        log.exception("could not audit actions of session %s", session_id)
