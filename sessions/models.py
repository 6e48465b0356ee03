from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

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

    class Purpose(models.TextChoices):
        WORK = "work"
        # Read-only: it reviews a pull request and never publishes (sessions/review_agent.py).
        REVIEW = "review"

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
    purpose = models.CharField(max_length=10, choices=Purpose.choices, default=Purpose.WORK)
    reviewed_pull_request = models.ForeignKey(
        "PullRequest",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="review_sessions",
        help_text="For a review session: the pull request it reviews.",
    )
    reviewed_commit = models.CharField(
        max_length=64, blank=True, help_text="For a review session: the head commit it reviews."
    )
    # The driver's fencing token: writes by a driver holding an older token are refused.
    driver_fence = models.PositiveBigIntegerField(default=0)
    timings = models.JSONField(default=dict, blank=True)
    drift = models.JSONField(default=dict, blank=True)
    diff_stats = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # Totals kept per turn so the metrics aggregate columns, not the event log.
    cost_usd = models.FloatField(default=0)
    sandbox_seconds = models.FloatField(default=0)
    retries = models.PositiveIntegerField(default=0)
    verify_ok = models.BooleanField(null=True, blank=True, help_text="The newest turn's verify.")
    start_ms = models.FloatField(null=True, blank=True, help_text="Queued to first agent event.")
    snapshot_age_s = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("prompt_session", "Can queue prompts in a session"),
            ("stop_session", "Can stop a running turn"),
        ]
        indexes = [
            models.Index(fields=["repository", "state"]),
            # The Metrics page reads a range of one or more repositories' sessions.
            models.Index(fields=["repository", "created_at"], name="session_repo_created_idx"),
        ]

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

    class Origin(models.TextChoices):
        PERSON = "", "a person"
        CI_FIX = "ci_fix", "the system, after a failed CI check"

    text = models.TextField()
    # Who asked: a person (the author), or the system on the author's behalf (a CI fix; the
    # author is then whom the turn is charged to and whose name its commits carry).
    origin = models.CharField(max_length=20, choices=Origin.choices, default="", blank=True)
    order = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    commit = models.CharField(max_length=64, blank=True, help_text="The turn's commit, if any.")
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session", "order"]
        constraints = [
            models.UniqueConstraint(fields=["session", "order"], name="prompt_order_per_session")
        ]

    def __str__(self) -> str:
        return f"prompt {self.order} of session {self.session_id}"


class Attachment(models.Model):
    """An image uploaded with a session's first prompt, stored at `attachments/<folder>/<name>`.

    It belongs to that session, and so to its repository: only that repository's members see it.
    Quoting its link in a prompt elsewhere grants nothing. A file with no session (stored before
    attachments had one, and linked by no prompt) is served to site admins only.
    """

    repository_path = "session__repository"

    folder = models.CharField(max_length=32)
    name = models.CharField(max_length=255)
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments"
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["folder", "name"], name="attachment_path_unique")
        ]

    def __str__(self) -> str:
        return f"attachment {self.folder}/{self.name} of session {self.session_id}"


class AgentConversation(models.Model):
    """What a session's agent remembers between turns (sessions.agents.base.Conversation): a
    CLI's own session id to resume, or the built-in agent's transcript and its compaction.
    Written by the turn's driver only, after every turn however it ended."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="conversation")
    runtime = models.CharField(max_length=40)
    resume_id = models.CharField(max_length=200, blank=True)
    messages = models.JSONField(default=list, blank=True)
    summary = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"conversation of session {self.session_id} ({self.runtime})"


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


class PullRequest(models.Model):
    """A session's result on its code host: one per session, whatever retries happen."""

    class State(models.TextChoices):
        OPEN = "open"
        MERGED = "merged"
        CLOSED = "closed"

    class Host(models.TextChoices):
        LOCAL = "local"
        GITHUB = "github"

    repository_path = "repository"

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="pull_request")
    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="pull_requests"
    )
    host = models.CharField(max_length=20, choices=Host.choices, default=Host.LOCAL)
    number = models.PositiveIntegerField(null=True, blank=True)
    url = models.CharField(max_length=500, blank=True)
    branch = models.CharField(max_length=250)
    base = models.CharField(max_length=200)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.OPEN)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="pull_requests",
    )  # fmt: skip
    opened_as_app = models.BooleanField(
        default=False, help_text="Opened as the GitHub App: the author had no GitHub token."
    )
    head_sha = models.CharField(max_length=64, blank=True)
    # Set once, when the repository's review agent (policy "every") took this PR on opening.
    auto_reviewed = models.BooleanField(default=False)
    additions = models.PositiveIntegerField(default=0)
    deletions = models.PositiveIntegerField(default=0)
    changed_files = models.PositiveIntegerField(default=0)
    merged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    merge_sha = models.CharField(max_length=64, blank=True)
    review_rounds = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    first_review_at = models.DateTimeField(null=True, blank=True)
    merged_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    reverted_at = models.DateTimeField(
        null=True, blank=True, help_text="Merged, then reverted on the base: an escaped defect."
    )
    revert_sha = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["repository", "created_at"], name="pr_repo_created_idx"),
            models.Index(fields=["created_at"], name="pr_created_idx"),
            models.Index(fields=["repository", "merged_at"], name="pr_repo_merged_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["repository", "host", "number"], name="pr_number_per_repository",
                condition=models.Q(number__isnull=False),
            )
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"PR {self.number or self.pk} ({self.state}) of session {self.session_id}"


class ReviewEvent(models.Model):
    """A review of a PR, from the code host or from time spent on the dashboard's review page."""

    class Kind(models.TextChoices):
        APPROVED = "approved"
        CHANGES_REQUESTED = "changes_requested"
        COMMENTED = "commented"
        VIEWED = "viewed", "time on the review page"

    repository_path = "pull_request__repository"

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    reviewer_login = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    seconds = models.PositiveIntegerField(default=0, help_text="Review effort this represents.")
    external_id = models.CharField(max_length=60, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["created_at"], name="review_created_idx")]

    def __str__(self) -> str:
        return f"{self.kind} on {self.pull_request_id} by {self.reviewer_login}"


class ModelAccess(models.Model):
    """One turn's access to the model gateway: the token the turn's runtime holds instead of a
    provider key (only its SHA-256 is stored). Valid while the turn runs: revoked when the turn
    ends or its sandbox does, and never after `expires_at` (sessions/model_access.py)."""

    token_sha256 = models.CharField(max_length=64, unique=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="model_accesses")
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="model_accesses")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+", help_text="Whose turn: the prompt's author, charged for its spend.",
    )  # fmt: skip
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="+")
    runtime = models.CharField(max_length=40)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["session", "revoked_at"], name="model_access_live_idx")]

    def __str__(self) -> str:
        return f"model access of turn {self.prompt_id} ({self.runtime})"


class ViewedFile(models.Model):
    """A reviewer marked one version of one file of a session's diff as viewed (their own
    mark: it collapses the file for them only). `key` names the version (the file's path and
    patch, sessions.diff_render.file_key): a later change to the file is not viewed yet."""

    repository_path = "session__repository"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="viewed_files")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    path = models.TextField()
    key = models.CharField(max_length=64)
    viewed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "user", "key"], name="viewed_file_once")
        ]

    def __str__(self) -> str:
        return f"{self.path} viewed by {self.user_id} in session {self.session_id}"


class ReviewFeedback(models.Model):
    """One submitted review that asked the agent for changes (line comments, or "changes
    requested"), from the code host or the dashboard: it becomes one follow-up prompt. `key`
    (the host's review id, or the dashboard's) makes a redelivered review queue nothing new."""

    class Source(models.TextChoices):
        GITHUB = "github"
        DASHBOARD = "dashboard"
        # The review agent's review (sessions/review_agent.py): posted, never a prompt.
        AGENT = "agent", "the review agent"

    repository_path = "session__repository"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="review_feedback")
    key = models.CharField(max_length=100, unique=True)
    source = models.CharField(max_length=20, choices=Source.choices)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    reviewer_login = models.CharField(max_length=100, blank=True)
    state = models.CharField(max_length=30, blank=True, help_text="approved, commented, …")
    body = models.TextField(blank=True)
    commit = models.CharField(max_length=64, blank=True, help_text="The head it reviewed.")
    url = models.CharField(max_length=500, blank=True)
    prompt = models.ForeignKey(
        Prompt, null=True, blank=True, on_delete=models.SET_NULL, related_name="review_feedback",
        help_text="The follow-up prompt it became (none when it was refused).",
    )  # fmt: skip
    refusal = models.TextField(blank=True, help_text="Why it did not become a prompt.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"review {self.key} of session {self.session_id}"


class ReviewComment(models.Model):
    """A reviewer's comment on one line (or, when that line is gone, one file) of a session's
    change. A dashboard comment is a draft (no `feedback`) until its author submits the review.
    Answered after the turn its prompt ran: the agent's reply and the commit that resolved it."""

    class State(models.TextChoices):
        DRAFT = "draft"
        QUEUED = "queued", "waiting for the agent"
        ANSWERED = "answered"
        REPLY_FAILED = "reply_failed", "answered, reply not posted"
        REFUSED = "refused", "not sent to the agent"
        POSTED = "posted", "posted by the review agent"

    repository_path = "session__repository"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="review_comments")
    feedback = models.ForeignKey(
        ReviewFeedback, null=True, blank=True, on_delete=models.CASCADE, related_name="comments"
    )
    external_id = models.CharField(
        max_length=100, null=True, blank=True, unique=True, help_text="The host's comment id."
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    author_login = models.CharField(max_length=100, blank=True)
    path = models.CharField(max_length=1000)
    line = models.PositiveIntegerField(null=True, blank=True, help_text="None: the whole file.")
    side = models.CharField(max_length=5, default="RIGHT")
    quoted = models.TextField(blank=True, help_text="The code the comment is on.")
    note = models.CharField(max_length=300, blank=True, help_text="Why it is on the file.")
    body = models.TextField()
    url = models.CharField(max_length=500, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT)
    reply = models.TextField(blank=True)
    reply_url = models.CharField(max_length=500, blank=True)
    resolved_commit = models.CharField(max_length=64, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session", "created_at", "pk"]
        indexes = [models.Index(fields=["session", "state"], name="review_comment_state_idx")]

    def __str__(self) -> str:
        return f"comment on {self.path}:{self.line or '-'} of session {self.session_id}"


class CheckResult(models.Model):
    """One CI check (a GitHub check run, check suite or commit status) on a commit of a
    session's pull request, as its code host last reported it: one row per check, updated as it
    moves from queued to completed, so a replayed delivery changes nothing."""

    class Source(models.TextChoices):
        CHECK_RUN = "check_run"
        CHECK_SUITE = "check_suite"
        STATUS = "status"

    repository_path = "pull_request__repository"

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="checks")
    key = models.CharField(max_length=200, unique=True, help_text="The check's id on its host.")
    source = models.CharField(max_length=20, choices=Source.choices)
    name = models.CharField(max_length=200)
    commit = models.CharField(max_length=64)
    status = models.CharField(max_length=20, help_text="queued, in_progress or completed.")
    conclusion = models.CharField(max_length=20, blank=True)
    summary = models.TextField(blank=True)
    excerpt = models.TextField(blank=True, help_text="The failing output's excerpt.")
    url = models.CharField(max_length=500, blank=True)
    on_head = models.BooleanField(default=False, help_text="Reported on the PR's head commit.")
    note = models.CharField(max_length=300, blank=True, help_text="Why nothing was done.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["pull_request", "commit"], name="check_pr_commit_idx")]

    def __str__(self) -> str:
        return f"{self.name} {self.conclusion or self.status} on {self.commit[:12]}"


class CIFix(models.Model):
    """What was done about a failed CI check on a pull request's head commit: at most one per
    commit (a second failing check on it, or a replay, finds this one). `attempt` counts the
    fix turns queued for the PR; `outcome` says whether the check then passed."""

    class State(models.TextChoices):
        QUEUED = "queued", "fix turn queued"
        OFFERED = "offered", "offered to the author"
        LIMIT = "limit", "attempt limit reached"
        REFUSED = "refused", "could not be queued"

    class Outcome(models.TextChoices):
        PENDING = "", "pending"
        GREEN = "green"
        RED = "red"

    repository_path = "pull_request__repository"

    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="ci_fixes")
    commit = models.CharField(max_length=64, help_text="The head commit whose check failed.")
    check_name = models.CharField(max_length=200)
    state = models.CharField(max_length=20, choices=State.choices)
    attempt = models.PositiveSmallIntegerField(default=0)
    prompt = models.OneToOneField(
        Prompt, null=True, blank=True, on_delete=models.SET_NULL, related_name="ci_fix"
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default="", blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pull_request", "commit"], name="ci_fix_per_commit")
        ]

    def __str__(self) -> str:
        return f"CI fix {self.state} for {self.check_name} on {self.commit[:12]}"
