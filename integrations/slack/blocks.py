"""The Block Kit status message of a session: repository, state, link (and the PR at the end)."""

from __future__ import annotations

from django.conf import settings

from sessions.models import Event, Session

EMOJI = {"queued": "⏳", "provisioning": "⚙️", "syncing": "🔄", "running": "🏃",
         "verifying": "🔎", "idle": "✅", "pr_open": "📬", "merged": "🎉",
         "closed": "🚪", "failed": "❌", "cancelled": "🛑"}  # fmt: skip


def session_link(session: Session) -> str:
    return settings.PUBLIC_URL.rstrip("/") + session.get_absolute_url()


def pr_url(session: Session) -> str:
    """The newest pull request link an event recorded (the PR step writes `pr_url`)."""
    value = (
        Event.objects.filter(session=session, kind="pull_request_published")
        .order_by("-seq")
        .values_list("payload__pr_url", flat=True)
        .first()
    )
    if value and value.startswith("/"):
        # A pull request reviewed here (a local repository): the link is to this server.
        value = settings.PUBLIC_URL.rstrip("/") + value
    return value or ""


def status_blocks(session: Session) -> tuple[str, list[dict]]:
    """(fallback text, blocks) for the thread's status message."""
    state = session.get_state_display()
    link = session_link(session)
    text = f"{EMOJI.get(session.state, '')} {session.repository.name}: {state} — {link}"
    fields = [
        {"type": "mrkdwn", "text": f"*Repository*\n{session.repository.name}"},
        {"type": "mrkdwn", "text": f"*State*\n{EMOJI.get(session.state, '')} {state}"},
    ]
    blocks: list[dict] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*<{link}|{session.title}>*"}},
        {"type": "section", "fields": fields},
    ]
    pr = pr_url(session)
    if pr:
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"Pull request: <{pr}>"}}
        )
    if session.error and session.state == "failed":
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": session.error[:300]}]}
        )
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn",
                   "text": "Reply in this thread to queue a follow-up prompt."}]})  # fmt: skip
    return text, blocks
