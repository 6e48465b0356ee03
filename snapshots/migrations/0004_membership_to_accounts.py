"""Membership moves to accounts/ (accounts.0001 takes it over): gone from this app's state
only, its table `snapshots_membership` stays where it is with every row."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("snapshots", "0003_approved_egress"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Membership")],
            database_operations=[],
        ),
    ]
