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
    # Changed only through sessions.services.session_transition (the table is sessions.states).
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    # The newest Event.seq; bumped in the same transaction as the insert, so seq is gap-free.
    last_seq = models.PositiveBigIntegerField(default=0)
    sandbox_id = models.CharField(max_length=100, blank=True)
    sandbox_backend = models.CharField(max_length=40, blank=True)
    session_snapshot_ref = models.CharField(
        max_length=500, blank=True, help_text="The session's own snapshot after its last turn."
    )
    agent_command = models.TextField(blank=True, help_text="For the `command` agent.")
    model = models.CharField(
        max_length=100, blank=True, help_text="Overrides INSPECT_LLM_MODEL / the CLI's default."
    )
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="The session whose agent started this one.",
    )
    # The driver's fencing token: writes by a driver holding an older token are refused.
    driver_fence = models.PositiveBigIntegerField(default=0)
    timings = models.JSONField(default=dict, blank=True)
    drift = models.JSONField(default=dict, blank=True)
    diff_stats = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
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
    commit = models.CharField(max_length=64, blank=True, help_text="The turn's commit, if any.")
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

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
        # The page's panels (diff, verification, screenshots) read one kind at a time.
        indexes = [models.Index(fields=["session", "kind", "seq"], name="event_kind_idx")]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.seq} {self.kind}"
