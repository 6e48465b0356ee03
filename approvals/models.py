from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions.models import Session


class ApprovalRequest(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXPIRED = "expired"
        EXECUTED = "executed"
        FAILED = "failed"

    repository_path = "session__repository"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="approvals")
    action = models.CharField(max_length=60)
    payload = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Empty when the session's agent asked.",
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_approvalrequest", "Can approve or reject irreversible actions")]

    def __str__(self) -> str:
        return f"{self.action} for session {self.session_id} ({self.state})"


class AuditEntry(models.Model):
    """Append-only, hash-chained record of who did what (first cut: refuses updates)."""

    class ActorKind(models.TextChoices):
        USER = "user"
        AGENT = "agent"
        SYSTEM = "system"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices)
    action = models.CharField(max_length=60)
    object_type = models.CharField(max_length=60, blank=True)
    object_id = models.CharField(max_length=60, blank=True)
    repository = models.ForeignKey(
        "snapshots.Repository", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    data = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.actor_kind}:{self.action} {self.object_type}:{self.object_id}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise PermissionError("audit entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("audit entries are append-only")
