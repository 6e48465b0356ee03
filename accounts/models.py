"""Who belongs to which repository, with which role."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """A member's role on one repository; each is a Django group holding its permissions."""

    ENGINEER = "engineer", "Engineer"
    REVIEWER = "reviewer", "Reviewer"
    MANAGER = "manager", "Manager"
    ADMIN = "admin", "Admin"


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    # By name: repositories belong to snapshots/, a layer above accounts.
    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ENGINEER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The table the model had in snapshots/, kept so that moving it moved no data.
        db_table = "snapshots_membership"
        constraints = [
            models.UniqueConstraint(fields=["user", "repository"], name="one_membership_per_repo")
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} on {self.repository}"


class Invitation(models.Model):
    """An invitation to join a repository with a role, sent to an e-mail address that has no
    account yet. Only the token's SHA-256 is stored: the link is shown once to the admin who
    invited and mailed to the address. Created and accepted by snapshots.members (audited)."""

    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="invitations"
    )
    email = models.EmailField()
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ENGINEER)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invitations_sent",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invitations_accepted",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.email} invited to {self.repository} as {self.role}"
