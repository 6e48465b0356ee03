"""The audit log is append-only and hash-chained; `inspect audit verify` finds tampering."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import DatabaseError, connection, transaction

from approvals import audit
from approvals.models import AuditEntry


@pytest.fixture
def entries_of(team, django_capture_on_commit_callbacks):
    """Make n entries, each committed as in production (its head reaches the sink)."""

    def make(n: int) -> list[AuditEntry]:
        made = []
        for i in range(n):
            with django_capture_on_commit_callbacks(execute=True):
                made.append(
                    audit.record(
                        "test.event", actor=team.admin, repository=team.repository, data={"n": i}
                    )
                )
        return made

    return make


def test_each_entry_carries_the_previous_ones_hash(team, entries_of):
    before = AuditEntry.objects.count()  # the team's memberships are audited too
    first, second, third = entries_of(3)
    assert [e.seq for e in (first, second, third)] == [before + 1, before + 2, before + 3]
    assert AuditEntry.objects.get(seq=1).prev_hash == ""
    assert second.prev_hash == first.hash and third.prev_hash == second.hash
    report = audit.verify()
    assert (report.checked, report.problems) == (before + 3, [])


def test_the_orm_refuses_to_change_or_remove_an_entry(team, entries_of):
    (entry,) = entries_of(1)
    entry.action = "something.else"
    with pytest.raises(PermissionError):
        entry.save()
    with pytest.raises(PermissionError):
        entry.delete()
    with pytest.raises(PermissionError):
        AuditEntry.objects.filter(pk=entry.pk).update(action="x")
    with pytest.raises(PermissionError):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.get(pk=entry.pk).action == "test.event"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
def test_postgresql_refuses_raw_updates_and_deletes(team, entries_of):
    (entry,) = entries_of(1)
    for sql in (
        "UPDATE approvals_auditentry SET action = 'x' WHERE id = %s",
        "DELETE FROM approvals_auditentry WHERE id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql, [entry.pk])
    assert AuditEntry.objects.get(pk=entry.pk).action == "test.event"


def _raw(sql: str, params: list) -> None:
    """Edit the table behind the application's back, as an attacker with SQL access would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE approvals_auditentry DISABLE TRIGGER USER")
        cursor.execute(sql, params)
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE approvals_auditentry ENABLE TRIGGER USER")


def test_verify_names_a_row_edited_by_hand(team, entries_of, inspect_cli):
    entries = entries_of(4)
    assert inspect_cli("audit", "verify")[0] == 0
    _raw(
        "UPDATE approvals_auditentry SET data = %s WHERE id = %s",
        [json.dumps({"n": 99}), entries[2].pk],
    )
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1
    assert f"seq {entries[2].seq} (id {entries[2].pk})" in err and "altered" in err
    assert f"{entries[2].seq - 1} good entries" in err


def test_verify_prints_the_head_to_keep_elsewhere(team, entries_of, inspect_cli):
    entries = entries_of(2)
    code, out, err = inspect_cli("audit", "verify")
    assert code == 0 and f"audit log intact: {entries[1].seq} entries" in out
    assert f"head: seq {entries[1].seq} hash {entries[1].hash}" in out


def test_verify_names_a_removed_row(team, entries_of, inspect_cli):
    entries = entries_of(4)
    _raw("DELETE FROM approvals_auditentry WHERE id = %s", [entries[1].pk])
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1 and f"seq {entries[1].seq}: missing (removed)" in err


def test_verify_notices_entries_cut_off_the_end(team, entries_of, inspect_cli):
    entries = entries_of(3)
    _raw("DELETE FROM approvals_auditentry WHERE id = %s", [entries[2].pk])
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1 and "removed" in err and f"{entries[2].seq} entries were written" in err


def test_export_prints_one_json_object_per_line(team, entries_of, inspect_cli):
    first, second = entries_of(2)
    audit.record("other.event", data={"secret": False})
    code, out, err = inspect_cli("audit", "export", "--action", "test.event")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [line["seq"] for line in lines] == [first.seq, second.seq]
    assert lines[1]["prev_hash"] == lines[0]["hash"] and lines[0]["actor_name"] == "admin"
    code, out, err = inspect_cli("audit", "export", "--action", "other.event")
    assert [json.loads(line)["action"] for line in out.splitlines()] == ["other.event"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_chain_without_forks(team):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers itself")
    errors = []

    def write(worker: int) -> None:
        try:
            for i in range(15):
                audit.record("test.concurrent", data={"worker": worker, "i": i})
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert AuditEntry.objects.filter(action="test.concurrent").count() == 60
    report = audit.verify()
    assert (report.checked, report.problems) == (AuditEntry.objects.count(), [])
    # Every committed head reached the sink, whichever order the workers wrote their lines in.
    heads = [json.loads(line) for line in audit.sink_path().read_text().splitlines()]
    assert sorted(h["seq"] for h in heads) == list(range(1, AuditEntry.objects.count() + 1))
