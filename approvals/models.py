from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from approvals.policy_rules import PolicyError, parse_policy


class ApprovalRequest(models.Model):
    """An irreversible action waiting for (or past) a reviewer's decision.

    Changed only through approvals.gate (request, decide, execute); the state moves by
    compare-and-set so a replayed decision or a second execution finds nothing to change.
    """

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXPIRED = "expired"
        EXECUTED = "executed"
        FAILED = "failed"

    repository_path = "repository"

    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="approval_requests"
    )
    # By name: sessions sits above the controls ("agent_sessions" is the sessions app's label).
    session = models.ForeignKey(
        "agent_sessions.Session",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="approvals",
        help_text="Empty for repository-level actions (a policy or egress change).",
    )
    action = models.CharField(max_length=60)
    payload = models.JSONField(default=dict, blank=True)
    idempotency_key = models.CharField(max_length=200, unique=True, null=True, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Empty when the session's agent asked.",
    )
    prompt_author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The author of the prompt that led to the request; may not approve it.",
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # Set when a worker claims the execution; a claim this old is a dead worker's.
    execution_started_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_approvalrequest", "Can approve or reject irreversible actions")]
        indexes = [models.Index(fields=["state", "expires_at"])]

    def __str__(self) -> str:
        where = f"session {self.session_id}" if self.session_id else f"repository {self.repository}"
        return f"{self.action} for {where} ({self.state})"

    def save(self, *args, **kwargs) -> None:
        # A session's request belongs to the session's repository (callers may name either).
        if self.repository_id is None and self.session_id is not None:
            self.repository_id = self.session.repository_id
        super().save(*args, **kwargs)

    @property
    def requester_label(self) -> str:
        if self.requested_by_id:
            return self.requested_by.get_username()
        # A snapshot build asks on behalf of the recipe it read (snapshots.egress).
        return (self.payload or {}).get("requester") or "the agent"


class ApprovalPolicy(models.Model):
    """A repository's approval policy (TOML, see approvals.policy); absent means the default."""

    repository = models.OneToOneField(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="approval_policy"
    )
    text = models.TextField(help_text="TOML; parsed and validated when saved.")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "approval policies"

    def __str__(self) -> str:
        return f"approval policy of {self.repository}"

    def save(self, *args, **kwargs) -> None:
        parse_policy(self.text)  # a policy that does not parse is never stored
        super().save(*args, **kwargs)

    def clean(self) -> None:
        try:
            parse_policy(self.text)
        except PolicyError as exc:
            raise ValidationError({"text": str(exc)}) from None


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise PermissionError("audit entries are append-only")

    def delete(self):
        raise PermissionError("audit entries are append-only")

    def bulk_update(self, *args, **kwargs):
        raise PermissionError("audit entries are append-only")


class AuditEntry(models.Model):
    """Append-only, hash-chained record of who did what (see approvals.audit).

    Actor and repository are kept by id *and* name without database constraints: the log
    outlives the users and repositories it names, and never blocks their deletion.
    """

    class ActorKind(models.TextChoices):
        USER = "user"
        AGENT = "agent"
        SYSTEM = "system"

    seq = models.PositiveBigIntegerField(unique=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, blank=True)
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices)
    action = models.CharField(max_length=60, db_index=True)
    object_type = models.CharField(max_length=60, blank=True)
    object_id = models.CharField(max_length=60, blank=True)
    repository = models.ForeignKey(
        "snapshots.Repository",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    repository_name = models.CharField(max_length=100, blank=True)
    session_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    data = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.actor_kind}:{self.action} {self.object_type}:{self.object_id}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise PermissionError("audit entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("audit entries are append-only")


class AuditHead(models.Model):
    """One row: the chain's newest seq and hash. Locked (select_for_update) by every append, so
    two writers never chain onto the same entry; also lets `audit verify` see a cut-off tail."""

    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"audit head at {self.seq}"


class RepositorySecret(models.Model):
    """A value given to a repository's commands as an environment variable, encrypted at rest
    (Fernet, key INSPECT_SECRETS_KEY). See approvals.secrets."""

    class Scope(models.TextChoices):
        SETUP_START = "setup_start", "setup and start commands only"
        AGENT = "agent", "setup, start and the agent"

    repository_path = "repository"

    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="secrets"
    )
    name = models.CharField(
        max_length=100,
        validators=[
            RegexValidator(r"^[A-Z_][A-Z0-9_]*$", "an environment variable name, e.g. NPM_TOKEN")
        ],
    )
    encrypted_value = models.TextField()
    scope = models.CharField(max_length=20, choices=Scope.choices, default=Scope.SETUP_START)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)
    last_used_at = models.DateTimeField(
        null=True, blank=True, help_text="When a build, start or agent command last got it."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "name"], name="one_secret_per_name")
        ]

    def __str__(self) -> str:
        return f"{self.repository}:{self.name}"
