"""On PostgreSQL, the database itself refuses UPDATE and DELETE of audit entries.

TRUNCATE is left alone: test databases are flushed with it, and it takes table-level rights an
application role need not have. Other databases rely on the ORM's refusal
(approvals.models.AuditQuerySet).
"""

from django.db import migrations

CREATE = """
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
DROP = """
DROP TRIGGER IF EXISTS approvals_audit_append_only ON approvals_auditentry;
DROP FUNCTION IF EXISTS approvals_audit_append_only();
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0003_required_fields")]

    operations = [migrations.RunPython(create, drop)]
