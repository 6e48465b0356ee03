"""The Metrics page's one statement reads the range's sessions from an index alone.

`metrics.queries._figures_postgresql` scans sessions by (repository, created_at) and needs
their id and per-session totals: with those INCLUDEd, PostgreSQL answers from the index
(an index-only scan) instead of visiting half the table's pages. PostgreSQL only (INCLUDE);
SQLite computes the figures another way. The index is not declared in Session.Meta, so that
the migration state (and makemigrations) is unchanged on every database.
"""

from django.db import migrations

NAME = "session_metrics_cover_idx"
COLUMNS = "(repository_id, created_at) INCLUDE "
COLUMNS += "(id, cost_usd, sandbox_seconds, retries, verify_ok, snapshot_age_s, start_ms)"


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(apps.get_model("agent_sessions", "Session")._meta.db_table)
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {NAME} ON {table} {COLUMNS}")


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {NAME}")


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0006_metrics_indexes")]

    operations = [migrations.RunPython(create_index, drop_index, elidable=False)]
