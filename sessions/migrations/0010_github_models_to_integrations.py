# GitHubLink and WebhookDelivery moved to integrations/github/ (issue 16). Only Django's state
# changes here: the tables stay, and integrations' 0002 takes them over under their names.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0009_agent_conversation'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='GitHubLink'),
                migrations.DeleteModel(name='WebhookDelivery'),
            ],
            database_operations=[],
        ),
    ]
