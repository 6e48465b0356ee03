"""The audit log: append-only, keyed and hash-chained (DESIGN.md invariant 5).

`record` is the one way an entry is written. Each entry's `hash` is an HMAC-SHA256, under
`settings.AUDIT_KEY` (kept outside the database), of the previous entry's hash and the canonical
JSON of its own fields: changing or removing any row breaks the chain from there on, and without
the key nobody can re-seal it. Writers take the single `AuditHead` row with SELECT … FOR UPDATE,
so concurrent appends chain in turn (seqs are allocated under that lock). After the entry
commits, its seq and hash also go to the sink outside the database (approvals.audit_sink), which
is what catches entries cut off the end. `verify` walks the chain, compares it with the sink and,
on PostgreSQL, checks the triggers that refuse UPDATE, DELETE and TRUNCATE (migrations 0004,
0006) are in place. The ORM refuses updates and deletes too (models.AuditQuerySet).

Entries written before the key existed were re-sealed under it once by migration 0006, which
appends an `audit.resealed` entry saying up to which seq and whether the old chain was intact.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from accounts import access
from approvals.audit_sink import read_heads, sink_path, sink_target, write_head
from approvals.models import AuditEntry, AuditHead
from inspect_web.text import shorten

log = logging.getLogger(__name__)

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
    if isinstance(value, str):
        return shorten(value, MAX_DATA_STRING, marker="…[{omitted} characters]…")
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
    """The entry's seal: HMAC-SHA256 under the audit key of the previous hash and its fields."""
    message = f"{prev_hash}\n{canonical(entry)}".encode()
    return hmac.new(settings.AUDIT_KEY, message, hashlib.sha256).hexdigest()


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
        # Only once committed: a rolled-back entry's seq is used again by the next one.
        transaction.on_commit(lambda: write_head(entry.seq, entry.hash))
    return entry


@dataclass(frozen=True)
class Problem:
    seq: int | None
    entry_id: int | None
    message: str

    def __str__(self) -> str:
        if self.seq is None:
            return self.message
        which = f"audit entry seq {self.seq}" + (f" (id {self.entry_id})" if self.entry_id else "")
        return f"{which}: {self.message}"


@dataclass
class Verification:
    """What `verify` found: entries whose seal and link check out (up to the first break), every
    problem, and notes that are not tampering (entries not yet anchored in the sink, …)."""

    checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    head: tuple[int, str] | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


Verifier = Callable[[Verification], None]
_verifiers: dict[str, Verifier] = {}


def register_verifier(name: str, verifier: Verifier) -> None:
    """Have `verify` also run `verifier`, which checks that records kept outside the audit log
    match the entries that audit them (an upper layer's own rows: the gateway's model
    requests), adding a Problem to the report for each that does not. Registered by the
    owner's AppConfig.ready(); registering a name again replaces it."""
    _verifiers[name] = verifier


def _run_verifiers(report: Verification) -> None:
    for name, verifier in _verifiers.items():
        try:
            verifier(report)
        except Exception as exc:  # a broken check is reported, never taken as a pass
            log.exception("audit verifier %s failed", name)
            report.problems.append(
                Problem(None, None, f"the {name} check could not run: {type(exc).__name__}: {exc}")
            )


def verify(*, batch: int = 2000) -> Verification:
    """Check every entry's HMAC and link, the chain against the sink outside the database,
    (PostgreSQL) the append-only triggers, and what the registered verifiers check (records
    of upper layers against their entries). Never raises for what it finds; reports it."""
    report = Verification()
    path = sink_path()
    sink = read_heads(path) if path is not None else None
    chain_broken = _verify_chain(report, sink, batch)
    last_seq = report.head[0] if report.head else 0
    if path is None:
        report.notes.append(
            f"the chain head goes to {sink_target()}: compare its last seq with {last_seq} there"
        )
    elif sink is None:
        if AuditEntry.objects.exists():
            message = (
                f"the audit sink {path} is missing (deleted?): entries cut off the end cannot "
                "be detected; restore it from a backup"
            )
            report.problems.append(Problem(None, None, message))
    else:
        _compare_with_sink(report, sink, last_seq, chain_broken)
    report.problems.extend(_trigger_problems())
    _run_verifiers(report)
    resealed = AuditEntry.objects.filter(action="audit.resealed").order_by("seq").first()
    if resealed is not None:
        report.notes.append(
            f"entries up to seq {resealed.data.get('through_seq')} were written before the "
            f"audit key and re-sealed under it at seq {resealed.seq} "
            f"({resealed.created_at:%Y-%m-%d %H:%M} UTC; old chain: "
            f"{resealed.data.get('old_chain')})"
        )
    return report


def _verify_chain(report: Verification, sink, batch: int) -> bool:
    """Walk the chain in the database; True when it breaks (a problem is recorded)."""
    expected_seq, prev_hash = 1, ""
    while True:
        rows = list(AuditEntry.objects.filter(seq__gte=expected_seq).order_by("seq")[:batch])
        if not rows:
            break
        for entry in rows:
            problem = None
            if entry.seq != expected_seq:
                problem = Problem(
                    expected_seq, None, f"missing (removed); the next entry is seq {entry.seq}"
                )
            elif entry.prev_hash != prev_hash:
                problem = Problem(
                    entry.seq, entry.pk, "its prev_hash does not match the entry before it"
                )
            elif not hmac.compare_digest(entry_hash(prev_hash, entry), entry.hash):
                problem = Problem(
                    entry.seq,
                    entry.pk,
                    f"its fields do not match its seal (altered, or re-hashed without the "
                    f"audit key: {entry})",
                )
            elif sink is not None and sink.heads.get(entry.seq, entry.hash) != entry.hash:
                problem = Problem(
                    entry.seq, entry.pk, f"its hash differs from the one in the sink {sink.path}"
                )
            if problem is not None:
                report.problems.append(problem)
                return True
            prev_hash, expected_seq = entry.hash, expected_seq + 1
            report.checked += 1
            report.head = (entry.seq, entry.hash)
    head = AuditHead.objects.filter(pk=1).first()
    if head is not None and (head.seq, head.hash) != (expected_seq - 1, prev_hash):
        report.problems.append(
            Problem(
                head.seq,
                None,
                f"the chain ends at seq {expected_seq - 1} but {head.seq} entries were written "
                "(entries at the end were removed)",
            )
        )
    return False


def _compare_with_sink(report: Verification, sink, last_seq: int, chain_broken: bool) -> None:
    if sink.last_seq > last_seq and not chain_broken:
        report.problems.append(
            Problem(
                sink.last_seq,
                None,
                f"missing: the sink {sink.path} records entries up to seq {sink.last_seq} but "
                f"the database ends at seq {last_seq} (entries cut off the end)",
            )
        )
    for seq in sink.conflicting:
        report.problems.append(
            Problem(seq, None, f"the sink {sink.path} records two different hashes for it")
        )
    if sink.unreadable:
        report.notes.append(f"{sink.path}: lines {sink.unreadable[:10]} are not head records")
    if sink.heads and not chain_broken:
        first = sink.first_seq
        if first > 1:
            report.notes.append(f"entries before seq {first} predate the sink {sink.path}")
        unanchored = sum(1 for seq in range(first, last_seq + 1) if seq not in sink.heads)
        if unanchored > 0:
            report.notes.append(
                f"{unanchored} entries are not (yet) in the sink: written while it could not "
                "be, or by a worker that stopped between commit and the sink"
            )


# Each must exist and be enabled ('O': origin, 'A': always; 'D' disabled, 'R' replica only).
TRIGGERS = ("approvals_audit_append_only", "approvals_audit_no_truncate")


def _trigger_problems() -> list[Problem]:
    """On PostgreSQL: the triggers that refuse UPDATE, DELETE and TRUNCATE of entries must be
    there and enabled. (Their removal cannot be refused from the database by a non-superuser;
    the table's owner is meant to be a role the application does not run as: see
    docs/approvals-and-audit.md.)"""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname, tgenabled FROM pg_trigger "
            "WHERE tgrelid = 'approvals_auditentry'::regclass AND NOT tgisinternal"
        )
        present = {name: str(enabled) for name, enabled in cursor.fetchall()}
    problems = []
    for name in TRIGGERS:
        state = present.get(name)
        if state in ("O", "A"):
            continue
        how = "missing (dropped)" if state is None else "disabled"
        message = f"trigger {name} on approvals_auditentry is {how}: changes are not refused"
        problems.append(Problem(None, None, message))
    return problems


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
    if not user.is_authenticated:
        return AuditEntry.objects.none()
    if user.is_superuser:
        return AuditEntry.objects.all()
    repositories = access.repositories_for(user).values("pk")
    return AuditEntry.objects.filter(
        Q(repository_id__in=repositories) | Q(repository_id__isnull=True, actor_id=user.pk)
    )
