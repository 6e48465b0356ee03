from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from inspect_web.runtimes import REPOSITORY_DEFAULT_RUNTIMES
from snapshots.sandbox import NetworkPolicy


class Repository(models.Model):
    name = models.SlugField(
        max_length=100,
        unique=True,
        validators=[RegexValidator(r"^[a-z0-9][a-z0-9._-]*$", "lowercase letters, digits, . _ -")],
        help_text="Short name used in URLs, the CLI and Slack.",
    )
    url = models.CharField(max_length=500, help_text="Any git URL or a local path.")
    default_branch = models.CharField(max_length=200, default="main")
    recipe_override = models.TextField(
        blank=True,
        help_text="Recipe TOML set in the dashboard; overrides .inspect/environment.toml.",
    )
    refresh_minutes = models.PositiveIntegerField(
        default=30, help_text="How often the snapshot is rebuilt (the recipe's value wins)."
    )
    default_agent = models.CharField(
        max_length=20,
        blank=True,
        choices=[(name, name) for name in REPOSITORY_DEFAULT_RUNTIMES],
        help_text="Agent for new sessions here; empty: the site's INSPECT_DEFAULT_AGENT.",
    )
    # The egress in force (DESIGN.md invariant 3): changed only by snapshots.egress, so neither
    # the repository's own recipe file nor the dashboard can widen it around the approval gate.
    approved_egress = models.JSONField(
        default=dict,
        blank=True,
        help_text="The last approved egress policy; empty means none (the baseline).",
    )
    egress_approved_at = models.DateTimeField(null=True, blank=True)
    allowed_models = models.JSONField(
        default=list,
        blank=True,
        help_text="Model names (or prefixes ending in *) the gateway lets this repository's "
        "agents use; empty: any.",
    )
    # Archived: no new sessions, no scheduled refreshes, hidden from New task and the dashboard;
    # its sessions, snapshots and audit entries stay (snapshots.repositories.repository_archive).
    archived_at = models.DateTimeField(null=True, blank=True)
    default_model = models.CharField(
        max_length=100,  # as Session.model, which it fills
        blank=True,
        help_text="Model for new sessions here that name none (runtimes that take a model); "
        "empty: the runtime's configured default.",
    )
    # What a failed CI check on a session's pull request does (sessions/ci_fixes.py).
    ci_fix_policy = models.CharField(
        max_length=10,
        choices=[("auto", "automatic"), ("ask", "ask the author first"), ("off", "off")],
        default="auto",
        help_text="A failed CI check on a session's PR: queue a fix turn (automatic), offer one "
        "on the session page (ask), or only record it (off).",
    )
    ci_fix_attempts = models.PositiveSmallIntegerField(
        default=2, help_text="CI-fix turns per pull request before the agent stops trying."
    )
    # When the review agent reviews a session's pull request (sessions/review_agent.py).
    review_agent = models.CharField(
        max_length=10,
        choices=[("off", "off"), ("request", "on request"), ("every", "every pull request")],
        default="request",
        help_text="The review agent: never (off), when someone presses Review this PR (on "
        "request), or on every pull request as it opens (every pull request).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "repositories"
        permissions = [
            ("view_metrics", "Can see review metrics dashboards"),
            ("manage_repository", "Can change repository settings, members and policies"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def approved_network(self) -> NetworkPolicy:
        """The last approved egress policy (`none` until one is approved)."""
        data = self.approved_egress or {}
        return NetworkPolicy(data.get("mode", "none"), tuple(data.get("domains", ())))


class Snapshot(models.Model):
    class State(models.TextChoices):
        BUILDING = "building"
        READY = "ready"
        SUPERSEDED = "superseded"
        FAILED = "failed"
        DELETED = "deleted"

    class Kind(models.TextChoices):
        FULL = "full"
        INCREMENTAL = "incremental"

    repository_path = "repository"

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="snapshots")
    branch = models.CharField(max_length=200)
    commit = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.BUILDING)
    backend = models.CharField(max_length=40, default="local")
    backend_ref = models.CharField(max_length=500, blank=True)
    build_seconds = models.FloatField(null=True, blank=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    file_count = models.IntegerField(null=True, blank=True)
    lockfile_hashes = models.JSONField(default=dict, blank=True)
    recipe_toml = models.TextField(blank=True, help_text="The recipe the snapshot was built with.")
    recipe_source = models.CharField(max_length=100, blank=True)
    egress = models.JSONField(
        default=dict, blank=True, help_text="The egress in force when it was built."
    )
    # Incremental refresh (snapshots/incremental.py): a snapshot stacked on `parent` holds only
    # what changed since it, as one more layer; `layer_depth` counts the layers a restore mounts.
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.FULL)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="stacked"
    )
    layer_depth = models.PositiveSmallIntegerField(default=1)
    added_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Bytes of the layer this build added (incremental)."
    )
    checked_at = models.DateTimeField(
        null=True, blank=True, help_text="Last refresh that found the branch and recipe unmoved."
    )
    log = models.TextField(blank=True, help_text="Build output (head and tail when long).")
    exit_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["repository", "branch", "state", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.repository} @ {self.commit[:10] or '?'} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("snapshots:detail", args=[self.pk])

    @property
    def age(self):
        return timezone.now() - (self.finished_at or self.created_at)
