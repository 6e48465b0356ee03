"""Encrypt the GitHub user tokens django-allauth stored in plain text (approvals.oauth_tokens).

Without INSPECT_SECRETS_KEY they cannot be encrypted, so they are deleted: each user logs in with
GitHub again (after the key is set) to store a new one; pull requests meanwhile open as the App.
"""

from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings
from django.db import migrations

PREFIX = "fernet:"  # approvals.secrets.SEALED_PREFIX, copied: a migration must not change


def encrypt_tokens(apps, schema_editor):
    token_model = apps.get_model("socialaccount", "SocialToken")
    keys = [k.strip() for k in settings.SECRETS_KEY.split(",") if k.strip()]
    if not keys:
        token_model.objects.all().delete()
        return
    fernet = MultiFernet([Fernet(k.encode()) for k in keys])

    def seal(value: str) -> str:
        if not value or value.startswith(PREFIX):
            return value
        return PREFIX + fernet.encrypt(value.encode()).decode()

    for row in token_model.objects.all():
        row.token, row.token_secret = seal(row.token), seal(row.token_secret)
        row.save(update_fields=["token", "token_secret"])


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0004_audit_append_only_trigger"),
        ("socialaccount", "0006_alter_socialaccount_extra_data"),
    ]

    operations = [migrations.RunPython(encrypt_tokens, migrations.RunPython.noop)]
