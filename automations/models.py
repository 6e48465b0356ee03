from __future__ import annotations

from django.conf import settings
from django.db import models


class Automation(models.Model):
    """A cron schedule that starts a session in a repository with a stored prompt, as its
    creator (who must keep the right to start sessions there)."""

    repository_path = "repository"

    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="automations"
    )
    name = models.CharField(max_length=100)
    prompt = models.TextField()
    agent = models.CharField(max_length=40, blank=True)
    agent_command = models.TextField(blank=True)
    cron = models.CharField(max_length=100, help_text="minute hour day-of-month month day-of-week")
    creator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="automations"
    )
    # The beat entry that fires it; disabled while paused.
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", null=True, blank=True, on_delete=models.SET_NULL
    )
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=300, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["repository__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["repository", "name"], name="automation_name_per_repo")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.repository})"


class AutomationRun(models.Model):
    """One firing. `period` is the schedule time it belongs to: unique per automation, so a
    duplicate delivery (two beats, a redelivered task) for the same period does nothing."""

    class State(models.TextChoices):
        STARTED = "started"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    repository_path = "automation__repository"

    automation = models.ForeignKey(Automation, on_delete=models.CASCADE, related_name="runs")
    period = models.DateTimeField()
    session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.STARTED)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-period"]
        constraints = [
            models.UniqueConstraint(fields=["automation", "period"], name="one_run_per_period")
        ]

    def __str__(self) -> str:
        return f"{self.automation} @ {self.period:%Y-%m-%d %H:%M} ({self.state})"
