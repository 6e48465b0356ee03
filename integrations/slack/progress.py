"""Session state → the thread's status message (chat.update), and the PR link once it opens."""

from __future__ import annotations

from celery import current_app
from django.db import transaction

from integrations.models import SlackThread
from integrations.slack.blocks import pr_url, status_blocks
from integrations.slack.web import client

# The worker task that updates the thread's status message (integrations.tasks).
UPDATE_STATUS_TASK = "integrations.tasks.update_slack_status"


def on_session_state(sender, *, session, previous: str, state: str, **kwargs) -> None:
    if not SlackThread.objects.filter(session_id=session.pk).exists():
        return
    session_id = session.pk
    # By name: integrations.tasks wraps this module (importing it here would be a cycle).
    transaction.on_commit(
        lambda: current_app.send_task(UPDATE_STATUS_TASK, args=(session_id,)), robust=True
    )


def status_update(session_id: int) -> None:
    thread = (
        SlackThread.objects.select_related("session__repository")
        .filter(session_id=session_id)
        .first()
    )
    if thread is None or not thread.status_ts:
        return
    fallback, blocks = status_blocks(thread.session)
    slack = client()
    slack.chat_update(channel=thread.channel_id, ts=thread.status_ts, text=fallback, blocks=blocks)
    pr = pr_url(thread.session)
    # Once: compare-and-set, so two workers updating at once post the link one time.
    if pr and SlackThread.objects.filter(pk=thread.pk, posted_pr=False).update(posted_pr=True):
        slack.chat_postMessage(
            channel=thread.channel_id, thread_ts=thread.thread_ts, text=f"Pull request opened: {pr}"
        )
