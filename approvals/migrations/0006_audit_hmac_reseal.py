"""Audit entries are sealed with an HMAC under INSPECT_AUDIT_KEY from now on; on PostgreSQL
TRUNCATE of the table is refused too.

Entries written before carried plain SHA-256 hashes, which anyone with SQL access could
recompute. Rather than keep two algorithms side by side (and old rows forgeable for ever), they
are re-sealed once, here, under the key, and an `audit.resealed` entry records up to which seq,
the old head, and whether the old chain was intact when re-sealed: tampering from before this
migration stays visible as "old chain: broken at seq N", and nothing written after it can be
re-sealed without the key. The new head also goes to the sink outside the database.

Reversing leaves the entries sealed (the old code would then call them altered).
"""

import hashlib

from django.db import migrations, transaction
from django.utils import timezone

ROW_TRIGGER = """
CREATE OR REPLACE FUNCTION approvals_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE =
        'audit entries are append-only: ' || TG_OP || ' refused on approvals_auditentry';
END
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS approvals_audit_append_only ON approvals_auditentry;
CREATE TRIGGER approvals_audit_append_only BEFORE UPDATE OR DELETE ON approvals_auditentry
    FOR EACH ROW EXECUTE FUNCTION approvals_audit_append_only();
"""
TRUNCATE_TRIGGER = """
DROP TRIGGER IF EXISTS approvals_audit_no_truncate ON approvals_auditentry;
CREATE TRIGGER approvals_audit_no_truncate BEFORE TRUNCATE ON approvals_auditentry
    FOR EACH STATEMENT EXECUTE FUNCTION approvals_audit_append_only();
"""


def _old_chain(entries) -> str:
    """'intact', or where the unkeyed SHA-256 chain was already broken."""
    prev, expected = "", 1
    from approvals.audit import canonical

    for entry in entries:
        if entry.seq != expected:
            return f"broken at seq {expected} (missing)"
        digest = hashlib.sha256(f"{prev}\n{canonical(entry)}".encode()).hexdigest()
        if entry.prev_hash != prev or entry.hash != digest:
            return f"broken at seq {entry.seq}"
        prev, expected = entry.hash, expected + 1
    return "intact"


def reseal(apps, schema_editor):
    from approvals.audit import entry_hash
    from approvals.audit_sink import write_head

    AuditEntry = apps.get_model("approvals", "AuditEntry")
    AuditHead = apps.get_model("approvals", "AuditHead")
    connection = schema_editor.connection
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        # The row trigger refuses the re-sealing UPDATEs; it comes back below.
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS approvals_audit_append_only ON approvals_auditentry"
        )
    entries = list(AuditEntry.objects.order_by("seq"))
    if entries:
        old_chain, old_head = _old_chain(entries), entries[-1].hash
        prev = ""
        # Park the old hashes first: they are unique, and a new one must not meet an old one.
        for entry in entries:
            AuditEntry.objects.filter(pk=entry.pk).update(hash=f"old:{entry.pk}")
        for entry in entries:
            entry.prev_hash, entry.hash = prev, entry_hash(prev, entry)
            AuditEntry.objects.filter(pk=entry.pk).update(prev_hash=entry.prev_hash, hash=entry.hash)
            prev = entry.hash
        anchor = AuditEntry(
            seq=entries[-1].seq + 1,
            created_at=timezone.now(),
            actor_kind="system",
            action="audit.resealed",
            object_type="audit",
            data={"through_seq": entries[-1].seq, "old_head": old_head, "old_chain": old_chain},
            prev_hash=prev,
        )
        anchor.hash = entry_hash(prev, anchor)
        anchor.save()
        AuditHead.objects.update_or_create(pk=1, defaults={"seq": anchor.seq, "hash": anchor.hash})
        seq, sealed = anchor.seq, anchor.hash
        transaction.on_commit(
            lambda: write_head(seq, sealed, resealed_through=seq - 1), using=connection.alias
        )
    if postgresql:
        schema_editor.execute(ROW_TRIGGER)
        schema_editor.execute(TRUNCATE_TRIGGER)


def drop_truncate_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS approvals_audit_no_truncate ON approvals_auditentry"
        )


class Migration(migrations.Migration):
    dependencies = [("approvals", "0005_encrypt_stored_oauth_tokens")]

    operations = [migrations.RunPython(reseal, drop_truncate_trigger)]
