"""Slack request signing (v0): HMAC-SHA256 of `v0:{timestamp}:{body}` with the signing secret,
refused when older than 5 minutes (slack_sdk's SignatureVerifier does both)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from slack_sdk.signature import SignatureVerifier


def request_is_from_slack(request: HttpRequest) -> bool:
    secret = settings.SLACK_SIGNING_SECRET
    if not secret:
        return False  # not configured: refuse everything rather than trust anyone
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    signature = request.headers.get("X-Slack-Signature", "")
    if not timestamp.isascii() or not timestamp.isdigit() or not signature:
        return False  # slack_sdk would raise on a missing or malformed timestamp
    return SignatureVerifier(secret).is_valid(
        body=request.body, timestamp=timestamp, signature=signature
    )
