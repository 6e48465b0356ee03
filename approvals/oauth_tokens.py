"""OAuth tokens stored by django-allauth (a GitHub user's token, used to open pull requests as
them) are encrypted at rest with INSPECT_SECRETS_KEY, like repository secrets.

The database only ever holds `seal`ed values: encrypted just before every save and decrypted when
a row is loaded, so allauth and integrations.github.codehost see plain text in memory and nothing
else changes. Without the key, tokens are not stored at all (settings: SOCIALACCOUNT_STORE_TOKENS).
"""

from __future__ import annotations

import logging

from allauth.socialaccount.models import SocialToken
from django.db.models.signals import post_init, post_save, pre_save
from django.dispatch import receiver

from inspect_web.sealing import SecretsUnavailable, seal, unseal

log = logging.getLogger(__name__)

FIELDS = ("token", "token_secret")


@receiver(post_init, sender=SocialToken)
def unseal_loaded_token(sender, instance: SocialToken, **kwargs) -> None:
    for name in FIELDS:
        value = instance.__dict__.get(name)  # a deferred field stays deferred
        if not value:
            continue
        try:
            instance.__dict__[name] = unseal(value)
        except SecretsUnavailable as exc:
            # Unusable rather than wrong: the user logs in with GitHub again to store a new one.
            log.warning("GitHub token %s of account %s: %s", instance.pk, instance.account_id, exc)
            instance.__dict__[name] = ""


@receiver(pre_save, sender=SocialToken)
def seal_token_before_saving(sender, instance: SocialToken, **kwargs) -> None:
    instance._plain_values = {name: getattr(instance, name) for name in FIELDS}
    for name in FIELDS:
        setattr(instance, name, seal(getattr(instance, name)))


@receiver(post_save, sender=SocialToken)
def keep_the_saved_token_usable(sender, instance: SocialToken, **kwargs) -> None:
    for name, value in getattr(instance, "_plain_values", {}).items():
        setattr(instance, name, value)
