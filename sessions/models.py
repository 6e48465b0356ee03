from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from snapshots.models import Repository


class State(models.TextChoices):
    QUEUED = "queued"
    PROVISIONING = "provisioning"
    SYNCING = "syncing"
    RUNNING = "running"
    VERIFYING = "verifying"
    IDLE = "idle"
    PR_OPEN = "pr_open", "PR open"
    MERGED = "merged"
    CLOSED = "closed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Session(models.Model):
    repository_path = "repository"

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="sessions")
    creator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="created_sessions"
    )
    title = models.CharField(max_length=200)
    branch = models.CharField(max_length=200)
    base_commit = models.CharField(max_length=64, blank=True)
    agent = models.CharField(max_length=40, default="builtin")
    snapshot = models.ForeignKey(
        "snapshots.Snapshot",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sessions",
        help_text="The repository snapshot the session started from (kept while it lives).",
    )
    # Changed only through sessions.states.transition(), which enforces the state machine.
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("prompt_session", "Can queue prompts in a session"),
            ("stop_session", "Can stop a running turn"),
        ]
        indexes = [models.Index(fields=["repository", "state"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    def get_absolute_url(self) -> str:
        return reverse("sessions:detail", args=[self.pk])


class Prompt(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="prompts")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="prompts"
    )
    text = models.TextField()
    order = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "order"]
        constraints = [
            models.UniqueConstraint(fields=["session", "order"], name="prompt_order_per_session")
        ]

    def __str__(self) -> str:
        return f"prompt {self.order} of session {self.session_id}"


class Event(models.Model):
    """One entry of a session's log: the source of truth every viewer reads (gap-free `seq`)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=30)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="event_seq_unique")]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.seq} {self.kind}"
