"""The audit log: append-only and hash-chained (DESIGN.md invariant 5).

`record` is the one way an entry is written. Each entry's hash is SHA-256 over the previous
entry's hash and the canonical JSON of its own fields, so changing or removing any row breaks
the chain from there on; `verify` walks it and names the first entry that does not fit. Writers
take the single `AuditHead` row with SELECT … FOR UPDATE, so concurrent appends chain in turn.
The ORM refuses updates and deletes (models.AuditQuerySet); on PostgreSQL a trigger refuses them
too (migration 0004).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.models import AuditEntry, AuditHead

MAX_DATA_STRING = 4000  # a long command or output is kept as head and tail
_actor: contextvars.ContextVar[Any] = contextvars.ContextVar("audit_actor", default=None)


@contextmanager
def acting_as(user) -> Iterator[None]:
    """Entries recorded inside (e.g. by model signals) name `user` as the actor."""
    token = _actor.set(user)
    try:
        yield
    finally:
        _actor.reset(token)


def current_actor():
    return _actor.get()


def _trim(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_DATA_STRING:
        half = MAX_DATA_STRING // 2
        return f"{value[:half]}…[{len(value) - MAX_DATA_STRING} characters]…{value[-half:]}"
    if isinstance(value, dict):
        return {str(k): _trim(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_trim(v) for v in value]
    return value


def canonical(entry: AuditEntry) -> str:
    """The JSON the hash covers: every field but the hashes, keys sorted, no spaces."""
    fields = {
        "seq": entry.seq,
        "created_at": entry.created_at.astimezone(UTC).isoformat(),
        "actor_id": entry.actor_id,
        "actor_name": entry.actor_name,
        "actor_kind": entry.actor_kind,
        "action": entry.action,
        "object_type": entry.object_type,
        "object_id": entry.object_id,
        "repository_id": entry.repository_id,
        "repository_name": entry.repository_name,
        "session_id": entry.session_id,
        "data": entry.data,
    }
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def entry_hash(prev_hash: str, entry: AuditEntry) -> str:
    return hashlib.sha256(f"{prev_hash}\n{canonical(entry)}".encode()).hexdigest()


def record(
    action: str,
    *,
    actor=None,
    actor_kind: str | None = None,
    repository=None,
    session=None,
    object_type: str = "",
    object_id: Any = "",
    data: dict[str, Any] | None = None,
) -> AuditEntry:
    """Append one entry. `actor` None means the current actor (`acting_as`) or, failing that,
    the system; pass actor_kind="agent" for a session's agent."""
    actor = actor if actor is not None else current_actor()
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None
    kind = actor_kind or (AuditEntry.ActorKind.USER if actor else AuditEntry.ActorKind.SYSTEM)
    if session is not None and repository is None:
        repository = session.repository
    # A JSON round trip now, so the hash covers exactly what the database gives back.
    clean = json.loads(json.dumps(_trim(data or {}), default=str).replace("\\u0000", ""))
    with transaction.atomic():
        head, _ = AuditHead.objects.select_for_update().get_or_create(pk=1)
        entry = AuditEntry(
            seq=head.seq + 1,
            created_at=timezone.now(),
            actor=actor,
            actor_name=actor.get_username() if actor else "",
            actor_kind=kind,
            action=action,
            object_type=object_type,
            object_id=str(object_id),
            repository=repository,
            repository_name=repository.name if repository is not None else "",
            session_id=session.pk if session is not None else None,
            data=clean,
            prev_hash=head.hash,
        )
        entry.hash = entry_hash(head.hash, entry)
        entry.save()
        AuditHead.objects.filter(pk=1).update(seq=entry.seq, hash=entry.hash)
    return entry


def record_for_session(session_id: int, action: str, **kwargs: Any) -> AuditEntry | None:
    """`record` for a session by id (from code that holds no Session object)."""
    from sessions.models import Session

    session = Session.objects.select_related("repository").filter(pk=session_id).first()
    if session is None:
        return None
    return record(action, session=session, **kwargs)


@dataclass(frozen=True)
class Problem:
    seq: int
    entry_id: int | None
    message: str

    def __str__(self) -> str:
        which = f"audit entry seq {self.seq}" + (f" (id {self.entry_id})" if self.entry_id else "")
        return f"{which}: {self.message}"


def verify(*, batch: int = 2000) -> tuple[int, Problem | None]:
    """Walk the chain; returns (entries checked, the first problem or None)."""
    expected_seq, prev_hash, checked = 1, "", 0
    while True:
        rows = list(AuditEntry.objects.filter(seq__gte=expected_seq).order_by("seq")[:batch])
        if not rows:
            break
        for entry in rows:
            if entry.seq != expected_seq:
                return checked, Problem(
                    expected_seq, None, f"missing (removed); the next entry is seq {entry.seq}"
                )
            if entry.prev_hash != prev_hash:
                return checked, Problem(
                    entry.seq, entry.pk, "its prev_hash does not match the entry before it"
                )
            if entry_hash(prev_hash, entry) != entry.hash:
                return checked, Problem(
                    entry.seq, entry.pk, f"its fields do not match its hash (altered: {entry})"
                )
            prev_hash, expected_seq = entry.hash, expected_seq + 1
            checked += 1
    head = AuditHead.objects.filter(pk=1).first()
    if head is not None and (head.seq, head.hash) != (expected_seq - 1, prev_hash):
        return checked, Problem(
            head.seq,
            None,
            f"the chain ends at seq {expected_seq - 1} but {head.seq} entries were written "
            "(entries at the end were removed)",
        )
    return checked, None


def as_json(entry: AuditEntry) -> dict[str, Any]:
    return {
        **json.loads(canonical(entry)),
        "id": entry.pk,
        "prev_hash": entry.prev_hash,
        "hash": entry.hash,
    }


def entries_visible_to(user):
    """Entries `user` may read: all for a site admin, else those of their repositories (and
    their own entries that name no repository, such as their logins)."""
    from django.db.models import Q

    from inspect_web import access

    if not user.is_authenticated:
        return AuditEntry.objects.none()
    if user.is_superuser:
        return AuditEntry.objects.all()
    repositories = access.repositories_for(user).values("pk")
    return AuditEntry.objects.filter(
        Q(repository_id__in=repositories) | Q(repository_id__isnull=True, actor_id=user.pk)
    )


def record_session_actions(session_id: int, actions: list[tuple[int, str, dict]]) -> None:
    """Audit a session's tool calls and commands: (event seq, kind, stored payload) each. Best
    effort after the events are stored: a failure is logged, never raised into the producer."""
    import logging

    from sessions.models import Session

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
        logging.getLogger(__name__).exception("could not audit actions of session %s", session_id)
