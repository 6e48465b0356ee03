"""Attacks on the audit log by someone with SQL access but neither the audit key nor the host's
file system: rewrite a row and re-hash the chain, cut rows off the end, truncate the table,
remove the append-only triggers. `inspect audit verify` must name each one."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from approvals import audit
from approvals.models import AuditEntry, AuditHead

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the triggers are PostgreSQL's"
)


@pytest.fixture
def entries(team, django_capture_on_commit_callbacks):
    """Five entries, committed as in production (so their heads reach the sink)."""
    made = []
    for i in range(5):
        with django_capture_on_commit_callbacks(execute=True):
            made.append(audit.record("test.event", actor=team.admin, data={"n": i}))
    return made


def _sql(*statements: tuple[str, list]) -> None:
    """Run SQL behind the application's back, triggers disabled as the table's owner can."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE approvals_auditentry DISABLE TRIGGER USER")
        for sql, params in statements:
            cursor.execute(sql, params)
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE approvals_auditentry ENABLE TRIGGER USER")


def _rehash_with_plain_sha256(start: AuditEntry) -> None:
    """Recompute the hashes from `start` on and the head the way the unkeyed chain did, so
    that every link fits again: what an attacker with only database access can do."""
    prev = start.prev_hash
    updates = []
    for entry in AuditEntry.objects.filter(seq__gte=start.seq).order_by("seq"):
        digest = hashlib.sha256(f"{prev}\n{audit.canonical(entry)}".encode()).hexdigest()
        updates.append(
            (
                "UPDATE approvals_auditentry SET prev_hash = %s, hash = %s WHERE id = %s",
                [prev, digest, entry.pk],
            )
        )
        prev = digest
    # Free the unique hashes first, so that no intermediate state collides.
    _sql(
        ("UPDATE approvals_auditentry SET hash = 'x' || id WHERE seq >= %s", [start.seq]),
        *updates,
    )
    last = AuditEntry.objects.order_by("-seq").first()
    AuditHead.objects.filter(pk=1).update(seq=last.seq, hash=last.hash)


def test_a_row_rewritten_and_the_chain_rehashed_is_caught(entries, inspect_cli):
    assert inspect_cli("audit", "verify")[0] == 0
    target = entries[2]
    _sql(
        (
            "UPDATE approvals_auditentry SET data = %s WHERE id = %s",
            [json.dumps({"n": "rewritten"}), target.pk],
        )
    )
    _rehash_with_plain_sha256(target)
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1, out
    assert "intact" not in out and f"seq {target.seq} (id {target.pk})" in err


def test_rows_cut_off_the_end_are_caught_against_the_sink(entries, inspect_cli):
    cut = entries[-2:]
    _sql(
        (
            "DELETE FROM approvals_auditentry WHERE id IN (%s, %s)",
            [cut[0].pk, cut[1].pk],
        )
    )
    # The attacker also winds the in-database head back to the new last entry.
    AuditHead.objects.filter(pk=1).update(seq=entries[-3].seq, hash=entries[-3].hash)
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1, out
    assert "sink" in err and f"seq {cut[1].seq}" in err


def test_a_deleted_sink_is_reported(entries, inspect_cli):
    sink = audit.sink_path()
    assert sink is not None and sink.exists()
    sink.unlink()
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1 and "missing" in err and str(sink) in err


def test_the_key_and_the_sink_are_private_files(entries):
    key_file = settings.AUDIT_KEY_FILE
    if key_file is not None:  # not set from the environment
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(audit.sink_path()).st_mode) == 0o600
    lines = [json.loads(line) for line in audit.sink_path().read_text().splitlines()]
    assert [(line["seq"], line["hmac"]) for line in lines[-5:]] == [
        (e.seq, e.hash) for e in entries
    ]


@pytest.mark.django_db(transaction=True)
def test_an_entry_rolled_back_never_reaches_the_sink():
    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        rolled_back = audit.record("test.rolled_back")
        raise Abort
    kept = audit.record("test.kept")  # autocommit: on_commit runs at once
    assert kept.seq == rolled_back.seq
    lines = [json.loads(line) for line in audit.sink_path().read_text().splitlines()]
    assert lines == [{"seq": kept.seq, "hmac": kept.hash}]


@postgresql_only
def test_truncate_is_refused(entries):
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("TRUNCATE approvals_auditentry")
    assert AuditEntry.objects.count() >= len(entries)


@postgresql_only
@pytest.mark.parametrize(
    "how", ["DROP TRIGGER {name} ON {table}", "ALTER TABLE {table} DISABLE TRIGGER {name}"]
)
@pytest.mark.parametrize("name", ["approvals_audit_append_only", "approvals_audit_no_truncate"])
def test_a_removed_or_disabled_trigger_is_reported(entries, inspect_cli, how, name):
    with connection.cursor() as cursor:
        cursor.execute(how.format(name=name, table="approvals_auditentry"))
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1 and name in err


@pytest.mark.django_db(transaction=True)
def test_entries_from_before_the_key_are_resealed_once_with_an_anchor(inspect_cli):
    """Migration 0006 re-seals rows hashed the old, unkeyed way and records that it did."""
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        ("approvals", "0005_encrypt_stored_oauth_tokens"),
        ("approvals", "0006_audit_hmac_reseal"),
    )
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        prev = ""
        for seq in (1, 2, 3):  # written by the old code: plain SHA-256
            entry = AuditEntry(
                seq=seq, created_at=timezone.now(), actor_kind="system", action="old.event",
                data={"n": seq}, prev_hash=prev,
            )  # fmt: skip
            entry.hash = hashlib.sha256(f"{prev}\n{audit.canonical(entry)}".encode()).hexdigest()
            entry.save()
            prev = entry.hash
        AuditHead.objects.update_or_create(pk=1, defaults={"seq": 3, "hash": prev})
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([after])
        # Then every later migration again (of approvals and of apps depending on it), so the
        # tests after this one find the schema whole.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    anchor = AuditEntry.objects.get(action="audit.resealed")
    assert anchor.seq == 4
    assert anchor.data == {"through_seq": 3, "old_head": prev, "old_chain": "intact"}
    code, out, err = inspect_cli("audit", "verify")
    assert code == 0, err
    assert "re-sealed under it at seq 4" in out and "old chain: intact" in out
    lines = [json.loads(line) for line in audit.sink_path().read_text().splitlines()]
    assert lines == [{"seq": 4, "hmac": anchor.hash, "resealed_through": 3}]


APP_ROLE_GRANTS = """
GRANT USAGE ON SCHEMA public TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role};
REVOKE UPDATE, DELETE, TRUNCATE ON approvals_auditentry FROM {role};
"""


@postgresql_only
def test_the_app_role_of_the_docs_appends_but_cannot_remove_the_guards(entries):
    """Run as docs/approvals-and-audit.md says (the app's role does not own the tables): it
    writes entries, and cannot truncate, disable the triggers or drop them."""
    role = "inspect_app_audit_test"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP ROLE IF EXISTS {role}")
        cursor.execute(f"CREATE ROLE {role}")
        cursor.execute(APP_ROLE_GRANTS.format(role=role))
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL ROLE {role}")
            entry = audit.record("test.as_app_role")
            assert entry.seq == entries[-1].seq + 1
            for sql in (
                "TRUNCATE approvals_auditentry",
                "ALTER TABLE approvals_auditentry DISABLE TRIGGER USER",
                "DROP TRIGGER approvals_audit_append_only ON approvals_auditentry",
                f"DELETE FROM approvals_auditentry WHERE id = {entry.pk}",
            ):
                with (
                    pytest.raises(DatabaseError, match="permission denied|must be owner"),
                    transaction.atomic(),
                    connection.cursor() as cursor,
                ):
                    cursor.execute(sql)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")  # SET LOCAL outlives a released savepoint
            cursor.execute(f"DROP OWNED BY {role}")
            cursor.execute(f"DROP ROLE {role}")


def test_the_audit_key_is_made_once_beside_the_secret_key_and_kept_private(tmp_path, monkeypatch):
    from inspect_web import env

    monkeypatch.delenv("INSPECT_AUDIT_KEY", raising=False)
    data = tmp_path / "fresh"
    data.mkdir()
    key, path = env.audit_key(data)
    assert path == data / "audit_key" and len(key) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert env.audit_key(data) == (key, path)
    assert [p.name for p in data.iterdir()] == ["audit_key"]  # no temporary file left
    monkeypatch.setenv("INSPECT_AUDIT_KEY", "k" * 40)
    assert env.audit_key(data) == (b"k" * 40, None)


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("INSPECT_AUDIT_KEY", "hunter2", "is shorter than 32 characters"),
        ("INSPECT_AUDIT_SINK", "audit.log", "is not an absolute file path"),
        ("INSPECT_AUDIT_SINK", "syslog:loghost", "is not syslog:"),
    ],
)
def test_a_bad_audit_setting_names_the_variable(tmp_path, monkeypatch, variable, value, fragment):
    from inspect_web import env

    monkeypatch.setenv(variable, value)
    with pytest.raises(env.ConfigError, match=f"^{variable}: .*{fragment}"):
        env.audit_key(tmp_path) if variable == "INSPECT_AUDIT_KEY" else env.audit_sink()


def test_the_head_can_go_to_syslog(settings, team, django_capture_on_commit_callbacks, tmp_path):
    """`syslog:/path` sends each head to that socket; `verify` then says where to compare."""
    import socket

    path = tmp_path / "log.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(path))
    receiver.settimeout(5)
    settings.AUDIT_SINK = f"syslog:{path}"
    try:
        with django_capture_on_commit_callbacks(execute=True):
            entry = audit.record("test.syslog")
        message = receiver.recv(4096).decode()
    finally:
        receiver.close()
    assert message.startswith("<86>")  # authpriv (10) * 8 + info (6)
    assert json.loads(message.split("inspect-audit-head ", 1)[1].rstrip("\x00")) == {
        "seq": entry.seq,
        "hmac": entry.hash,
    }
    report = audit.verify()
    assert report.ok and any(f"syslog:{path}" in note for note in report.notes)
