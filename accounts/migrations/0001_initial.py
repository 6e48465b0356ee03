"""Membership, taken over from snapshots/ (snapshots.0004): created in state only, on the table
it always had (`snapshots_membership`), so no row moves.

Its content type is renamed to this app as well, so the permissions on memberships (and admin
log entries) that pointed at it keep pointing at the model.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _move_content_type(apps, schema_editor, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    # A fresh database has none yet (content types are created after migrating).
    if not content_type.objects.using(db).filter(app_label=new, model="membership").exists():
        content_type.objects.using(db).filter(app_label=old, model="membership").update(
            app_label=new
        )


def to_accounts(apps, schema_editor) -> None:
    _move_content_type(apps, schema_editor, "snapshots", "accounts")


def to_snapshots(apps, schema_editor) -> None:
    _move_content_type(apps, schema_editor, "accounts", "snapshots")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("snapshots", "0004_membership_to_accounts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Membership",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "role",
                            models.CharField(
                                choices=[
                                    ("engineer", "Engineer"),
                                    ("reviewer", "Reviewer"),
                                    ("manager", "Manager"),
                                    ("admin", "Admin"),
                                ],
                                default="engineer",
                                max_length=20,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "repository",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to="snapshots.repository",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "snapshots_membership",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("user", "repository"), name="one_membership_per_repo"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(to_accounts, to_snapshots),
    ]
