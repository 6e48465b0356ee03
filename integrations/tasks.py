"""Celery tasks: thin wrappers; Slack wants an answer within 3 s, so the work happens here."""

from __future__ import annotations

from celery import shared_task

from integrations.slack.conversation import handle_message
from integrations.slack.progress import status_update


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=3)
def handle_slack_message(channel: str, user: str, text: str, ts: str, thread_ts: str = "") -> None:
    handle_message(channel=channel, user=user, text=text, ts=ts, thread_ts=thread_ts)


@shared_task(acks_late=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=3)
def update_slack_status(session_id: int) -> None:
    status_update(session_id)
