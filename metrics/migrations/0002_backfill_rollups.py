"""Backfill: the rollups of every existing session (metrics/rollups.py, rebuild_rollups).

It runs today's rebuild (not a frozen copy): the rollups are derived data, recomputed whole
from the sessions, and `manage.py inspect metrics rollups --rebuild` does the same at any time.
"""

from django.db import migrations


def backfill(apps, schema_editor) -> None:
    # Here, not at module top: the rebuild imports the apps' models, ready only when it runs.
    from metrics.rollups import rebuild_rollups

    rebuild_rollups()


class Migration(migrations.Migration):
    dependencies = [
        ("metrics", "0001_rollups"),
        ("agent_sessions", "0012_modelaccess"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
