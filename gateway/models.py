"""What the gateway records: every model request (metered, hashed, audited), its bodies for a
while, and the budgets admins set."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ModelRequest(models.Model):
    """One request a runtime made through the gateway, recorded whole once it ended (never
    half-written). Kept when its session is deleted: spend is history."""

    class Outcome(models.TextChoices):
        OK = "ok"
        UPSTREAM_ERROR = "upstream_error", "the provider answered with an error"
        REFUSED_BUDGET = "refused_budget", "a budget would be passed"
        REFUSED_POLICY = "refused_policy", "the model is not allowed here"
        BAD_REQUEST = "bad_request"
        CLIENT_GONE = "client_gone", "the runtime went away mid-response"
        UNREACHABLE = "unreachable", "the provider could not be reached"

    access = models.ForeignKey(
        "agent_sessions.ModelAccess", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="requests",
    )  # fmt: skip
    session = models.ForeignKey(
        "agent_sessions.Session", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="model_requests",
    )  # fmt: skip
    prompt = models.ForeignKey(
        "agent_sessions.Prompt", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    repository = models.ForeignKey(
        "snapshots.Repository", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    runtime = models.CharField(max_length=40)
    provider = models.CharField(max_length=20, help_text="anthropic or openai (wire format).")
    endpoint = models.CharField(max_length=40, help_text="messages, chat.completions, ...")
    model = models.CharField(max_length=200, blank=True)
    stream = models.BooleanField(default=False)
    status = models.PositiveSmallIntegerField(help_text="The HTTP status the runtime got.")
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    message = models.TextField(blank=True, help_text="Why it was refused or failed.")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True, help_text="None: the model is unpriced.")
    latency_ms = models.FloatField(default=0)
    first_byte_ms = models.FloatField(null=True, blank=True)
    request_sha256 = models.CharField(max_length=64)
    response_sha256 = models.CharField(max_length=64)
    request_bytes = models.PositiveIntegerField(default=0)
    response_bytes = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["created_at"], name="model_req_created_idx"),
            models.Index(fields=["session", "created_at"], name="model_req_session_idx"),
            models.Index(fields=["user", "created_at"], name="model_req_user_idx"),
            models.Index(fields=["repository", "created_at"], name="model_req_repo_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.endpoint} {self.model} ({self.status})"


class ModelRequestBody(models.Model):
    """The full (secret-scrubbed) bodies of a request, kept INSPECT_GATEWAY_BODY_DAYS days for
    the repository's members to replay."""

    request = models.OneToOneField(ModelRequest, on_delete=models.CASCADE, related_name="body")
    request_body = models.TextField()
    response_body = models.TextField()
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"bodies of model request {self.request_id}"


class Budget(models.Model):
    """A spending limit in USD for a user, a repository or the whole site, per day or month
    (UTC calendar periods), set by admins."""

    class Scope(models.TextChoices):
        USER = "user"
        REPOSITORY = "repository"
        SITE = "site"

    class Period(models.TextChoices):
        DAY = "day"
        MONTH = "month"

    scope = models.CharField(max_length=20, choices=Scope.choices)
    period = models.CharField(max_length=10, choices=Period.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
        related_name="+",
    )  # fmt: skip
    repository = models.ForeignKey(
        "snapshots.Repository", null=True, blank=True, on_delete=models.CASCADE,
        related_name="+",
    )  # fmt: skip
    limit_usd = models.DecimalField(max_digits=12, decimal_places=4)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "period", "user", "repository"], name="one_budget_per_target",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(scope="user", user__isnull=False, repository__isnull=True)
                    | models.Q(scope="repository", user__isnull=True, repository__isnull=False)
                    | models.Q(scope="site", user__isnull=True, repository__isnull=True)
                ),
                name="budget_target_matches_scope",
            ),
        ]  # fmt: skip

    def __str__(self) -> str:
        target = self.user or self.repository or "site"
        return f"{self.period} budget of {target}: ${self.limit_usd}"
