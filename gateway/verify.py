"""`audit verify`'s check of the gateway's meter: every ModelRequest row must match the audit
entry written with it in the same transaction (gateway.metering). Someone with SQL access can
rewrite a row's tokens, cost or body hashes, or delete a row, but cannot re-seal the audit
chain without the audit key; so a row that differs from its entry, an entry whose row is gone,
and a row with no entry are each named. Registered with approvals.audit in GatewayConfig.ready.
"""

from __future__ import annotations

from approvals.audit import Problem, Verification
from approvals.models import AuditEntry
from gateway.metering import AUDIT_ACTION, AUDITED_FIELDS
from gateway.models import ModelRequest

NAME = "model requests"
BATCH = 2000
NAMED = 20  # problems of one kind named one by one; beyond, a count


def verify_model_requests(report: Verification) -> None:
    """Add a Problem to `report` for each ModelRequest that does not match its audit entry."""
    audited: set[int] = set()
    found: list[Problem] = []
    entries = AuditEntry.objects.filter(action=AUDIT_ACTION).order_by("seq")
    last_seq = 0
    while True:
        batch = list(entries.filter(seq__gt=last_seq).only("seq", "object_id", "data")[:BATCH])
        if not batch:
            break
        last_seq = batch[-1].seq
        ids = {entry.seq: _request_id(entry) for entry in batch}
        rows = ModelRequest.objects.in_bulk([pk for pk in ids.values() if pk is not None])
        for entry in batch:
            pk = ids[entry.seq]
            if pk is None:
                found.append(_problem(entry, f"names no model request ({entry.object_id!r})"))
                continue
            audited.add(pk)
            row = rows.get(pk)
            if row is None:
                found.append(_problem(entry, f"model request {pk} is missing (deleted)"))
                continue
            differences = _differences(entry.data, row)
            if differences:
                found.append(
                    _problem(entry, f"model request {pk} was altered: {'; '.join(differences)}")
                )
    report.problems.extend(_named(found, "audit entries of model requests do not match"))
    every = ModelRequest.objects.order_by("pk").values_list("pk", flat=True)
    unaudited = [
        Problem(None, None, f"model request {pk} has no audit entry (removed, or forged)")
        for pk in every.iterator(chunk_size=BATCH)
        if pk not in audited
    ]
    report.problems.extend(_named(unaudited, "model requests have no audit entry"))
    report.notes.append(f"{len(audited)} model requests checked against their audit entries")


def _named(problems: list[Problem], what: str) -> list[Problem]:
    """The first NAMED problems, then one saying how many more."""
    if len(problems) <= NAMED:
        return problems
    more = len(problems) - NAMED
    return [*problems[:NAMED], Problem(None, None, f"{more:,} more {what}")]


def _request_id(entry: AuditEntry) -> int | None:
    try:
        return int(entry.object_id)
    except ValueError:
        return None


def _differences(data: dict, row: ModelRequest) -> list[str]:
    """What differs between the entry's data and the row, as "FIELD is X in the audit log,
    Y in the database"."""
    found = []
    for name in AUDITED_FIELDS:
        audited, stored = data.get(name), getattr(row, name)
        if audited != stored:
            found.append(f"{name} is {audited!r} in the audit log, {stored!r} in the database")
    return found


def _problem(entry: AuditEntry, message: str) -> Problem:
    # No seq of its own: the chain itself is sound, so the report must not read as "broken
    # after N entries"; the entry is named in the message.
    return Problem(None, None, f"audit entry seq {entry.seq} ({AUDIT_ACTION}): {message}")
