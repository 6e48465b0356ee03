# GitHubLink and WebhookDelivery moved here from sessions (issue 16), keeping their tables: only
# Django's state changes. Their content types follow them, so permissions granted on them and
# admin log entries stay attached.

import django.db.models.deletion
from django.db import migrations, models

MOVED = ['githublink', 'webhookdelivery']


def content_types_follow(apps, schema_editor, *, old: str, new: str) -> None:
    ContentType = apps.get_model('contenttypes', 'ContentType')
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor) -> None:
    content_types_follow(apps, schema_editor, old='agent_sessions', new='integrations')


def backwards(apps, schema_editor) -> None:
    content_types_follow(apps, schema_editor, old='integrations', new='agent_sessions')


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0010_github_models_to_integrations'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('integrations', '0001_initial'),
        ('snapshots', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='WebhookDelivery',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('delivery_id', models.CharField(max_length=100, unique=True)),
                        ('event', models.CharField(max_length=60)),
                        ('action', models.CharField(blank=True, max_length=60)),
                        ('outcome', models.CharField(blank=True, max_length=300)),
                        ('received_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'agent_sessions_webhookdelivery',
                    },
                ),
                migrations.CreateModel(
                    name='GitHubLink',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('full_name', models.CharField(help_text='owner/name on GitHub.', max_length=200)),
                        ('installation_id', models.PositiveBigIntegerField(blank=True, help_text='Looked up from the App when empty.', null=True)),
                        ('repository', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='github', to='snapshots.repository')),
                    ],
                    options={
                        'db_table': 'agent_sessions_githublink',
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
