"""Slack's Web API, at settings.SLACK_API_URL (tests point it at a local server)."""

from __future__ import annotations

from django.conf import settings
from slack_sdk import WebClient


def client() -> WebClient:
    base = settings.SLACK_API_URL.rstrip("/") + "/"
    return WebClient(token=settings.SLACK_BOT_TOKEN, base_url=base, timeout=10)
