from __future__ import annotations

from django.conf import settings
from django.db import models

# GitHub's models live beside its code; importing them here makes them this app's models.
from integrations.github.models import GitHubLink, WebhookDelivery

__all__ = [
    "GitHubLink",
    "SlackChannelRoute",
    "SlackKeywordRule",
    "SlackThread",
    "SlackUser",
    "WebhookDelivery",
]


class SlackChannelRoute(models.Model):
    """Messages in this channel go to this repository (routing's first rule)."""

    channel_id = models.CharField(max_length=40, unique=True)
    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="slack_channels"
    )

    def __str__(self) -> str:
        return f"{self.channel_id} → {self.repository}"


class SlackKeywordRule(models.Model):
    """A message containing `keyword` (a whole word, any case) goes to `repository`; rules are
    tried by ascending `priority` (routing's second rule)."""

    keyword = models.CharField(max_length=100)
    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="slack_keywords"
    )
    priority = models.PositiveIntegerField(default=100)

    class Meta:
        ordering = ["priority", "id"]

    def __str__(self) -> str:
        return f"{self.keyword!r} → {self.repository}"


class SlackUser(models.Model):
    """A Slack user's account here: set by an admin, or found by email through users.info."""

    slack_user_id = models.CharField(max_length=40, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_identities"
    )

    def __str__(self) -> str:
        return f"{self.slack_user_id} is {self.user}"


class SlackThread(models.Model):
    """The Slack thread a session was started from, and the status message kept up to date."""

    session = models.OneToOneField(
        "agent_sessions.Session", on_delete=models.CASCADE, related_name="slack_thread"
    )
    channel_id = models.CharField(max_length=40)
    thread_ts = models.CharField(max_length=40)
    status_ts = models.CharField(max_length=40, blank=True, help_text="the status message's ts")
    posted_pr = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["channel_id", "thread_ts"], name="one_session_per_thread"
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel_id}/{self.thread_ts} → session {self.session_id}"
