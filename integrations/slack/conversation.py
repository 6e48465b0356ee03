"""What a Slack message does: in a session's thread it queues a follow-up prompt; elsewhere it
starts a session in the routed repository, as the Slack user's account, if they are a member.
Every answer goes in the message's thread."""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.core.exceptions import PermissionDenied
from slack_sdk.errors import SlackApiError

from accounts import access
from accounts.identity import users_by_verified_email
from integrations.models import SlackThread, SlackUser
from integrations.slack import routing
from integrations.slack.blocks import status_blocks
from integrations.slack.web import client
from sessions import services

log = logging.getLogger(__name__)
MENTION = re.compile(r"<@[A-Z0-9]+>")


def account_for(slack_user_id: str):
    """The account of a Slack user: the mapping, else the account for which their Slack email
    is a verified address (an unverified one could have been typed in by anyone)."""
    mapped = SlackUser.objects.filter(slack_user_id=slack_user_id).select_related("user").first()
    if mapped:
        return mapped.user
    try:
        profile = client().users_info(user=slack_user_id)["user"]["profile"]
    except (SlackApiError, KeyError, OSError) as exc:
        log.warning("users.info for %s failed: %s", slack_user_id, exc)
        return None
    email = (profile.get("email") or "").strip()
    matches = list(users_by_verified_email(email)[:2]) if email else []
    user = matches[0] if len(matches) == 1 else None  # two accounts claim it: ask an admin
    if user:
        SlackUser.objects.get_or_create(slack_user_id=slack_user_id, defaults={"user": user})
    return user


def reply(channel: str, thread_ts: str, text: str, blocks: list | None = None) -> str:
    response = client().chat_postMessage(
        channel=channel, thread_ts=thread_ts, text=text, blocks=blocks
    )
    return response.get("ts", "")


def handle_message(*, channel: str, user: str, text: str, ts: str, thread_ts: str = "") -> None:
    text = MENTION.sub("", text or "").strip()
    root = thread_ts or ts
    thread = (
        SlackThread.objects.filter(channel_id=channel, thread_ts=root)
        .select_related("session__repository")
        .first()
    )
    account = account_for(user)
    if account is None:
        reply(channel, root, "I don't know who you are here: ask an Inspect Web admin to link "
              "your Slack user to your account (or use the same email on both).")  # fmt: skip
        return
    if thread is not None:
        _follow_up(thread, account, text)
        return
    if not text:
        reply(channel, root, "Tell me what to do, e.g. `@inspect repo:widgets fix the flaky test`.")
        return
    repository = routing.route(channel=channel, text=text)
    if repository is None or not access.repositories_for(account).filter(pk=repository.pk).exists():
        names = ", ".join(access.repositories_for(account).values_list("name", flat=True)) or "none"
        reply(channel, root, "Which repository is this for? Say it as `repo:NAME` in your message "
              f"(yours: {names}).")  # fmt: skip
        return
    try:
        session = services.session_create(
            repository=repository,
            creator=account,
            prompt=routing.EXPLICIT.sub("", text).strip() or text,
            agent=settings.SLACK_AGENT,
            agent_command=settings.SLACK_AGENT_COMMAND,
        )
    except (services.SessionError, PermissionDenied) as exc:
        reply(channel, root, f"I could not start a session in {repository.name}: {exc}")
        return
    fallback, blocks = status_blocks(session)
    thread = SlackThread.objects.create(session=session, channel_id=channel, thread_ts=root)
    thread.status_ts = reply(channel, root, fallback, blocks)
    thread.save(update_fields=["status_ts"])


def _follow_up(thread: SlackThread, account, text: str) -> None:
    if not text:
        return
    from sessions.models import Prompt

    session = thread.session
    # Asked before queueing: is something still to run ahead of this prompt?
    ahead = session.prompts.filter(state__in=[Prompt.State.QUEUED, Prompt.State.RUNNING])
    waits = ahead.exists()
    try:
        prompt = services.prompt_queue(session=session, author=account, text=text)
    except (services.SessionError, PermissionDenied) as exc:
        reply(thread.channel_id, thread.thread_ts, f"Not queued: {exc}")
        return
    when = "it runs after the current turn" if waits else "it runs now"
    reply(thread.channel_id, thread.thread_ts, f"Queued as prompt {prompt.order}; {when}.")
