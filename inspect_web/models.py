"""What an admin changes at run time, kept in the database (inspect_web.site_settings).

Models of the product live in the apps named for what users see (accounts, snapshots,
sessions, approvals); this one is the shell's, so that every layer can read a setting."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SiteSetting(models.Model):
    """One setting changed on the settings pages; `value` is sealed when the setting is secret
    (inspect_web.sealing), so the database alone never yields a key."""

    name = models.CharField(max_length=100, primary_key=True)
    value = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return self.name
