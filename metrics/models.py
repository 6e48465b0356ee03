"""The Metrics page's rollups: every additive figure and three percentile sketches per
repository and UTC day (the day its sessions started), kept current from marks that the code
changing sessions, pull requests and reviews leaves (metrics/rollups.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class DailyRollup(models.Model):
    """The figures of one repository's sessions started on one UTC day, recomputed whole from
    the source rows (never incremented, so a replayed change cannot count twice). The sums are
    Figures' additive fields; the sketches (metrics/sketch.py) hold start latency (ms), time to
    first review and time to merge (s)."""

    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="+"
    )
    day = models.DateField()
    sessions = models.IntegerField(default=0)
    prs = models.IntegerField(default=0)
    merged = models.IntegerField(default=0)
    closed = models.IntegerField(default=0)
    merged_lines = models.BigIntegerField(default=0)
    escaped = models.IntegerField(default=0)
    merged_rounds = models.IntegerField(default=0)
    reviewed = models.IntegerField(default=0)
    first_review_s = models.FloatField(default=0)
    merge_s = models.FloatField(default=0)
    review_s = models.BigIntegerField(default=0)
    reviews = models.IntegerField(default=0)
    cost_usd = models.FloatField(default=0)
    review_cost_usd = models.FloatField(default=0)
    sandbox_s = models.FloatField(default=0)
    retries = models.IntegerField(default=0)
    verify_ok = models.IntegerField(default=0)
    verify_n = models.IntegerField(default=0)
    snapshot_n = models.IntegerField(default=0)
    snapshot_s = models.FloatField(default=0)
    ci_fixes = models.IntegerField(default=0)
    ci_fixes_green = models.IntegerField(default=0)
    # Sketches: (first lane, counts), how many values each holds, and the values when few.
    start_first = models.IntegerField(default=0)
    start_counts = models.BinaryField(default=b"")
    start_n = models.IntegerField(default=0)
    start_exact = models.BinaryField(default=b"")
    first_review_first = models.IntegerField(default=0)
    first_review_counts = models.BinaryField(default=b"")
    first_review_n = models.IntegerField(default=0)
    first_review_exact = models.BinaryField(default=b"")
    merge_first = models.IntegerField(default=0)
    merge_counts = models.BinaryField(default=b"")
    merge_n = models.IntegerField(default=0)
    merge_exact = models.BinaryField(default=b"")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "day"], name="metrics_rollup_repo_day")
        ]

    def __str__(self) -> str:
        return f"rollup of repository {self.repository_id} on {self.day}"


class AuthorDailyRollup(models.Model):
    """The additive figures of one author's sessions (their creator's) in one repository on one
    UTC day; recomputed with the repository's DailyRollup."""

    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="+"
    )
    day = models.DateField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    sessions = models.IntegerField(default=0)
    prs = models.IntegerField(default=0)
    merged = models.IntegerField(default=0)
    merged_lines = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0)
    sandbox_s = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["repository", "day", "author"], name="metrics_author_rollup_key"
            )
        ]

    def __str__(self) -> str:
        return f"rollup of author {self.author_id} in {self.repository_id} on {self.day}"


class RollupMark(models.Model):
    """A (repository, day) whose rollup may be stale: written in the transaction that changed
    its sessions, PRs or reviews; deleted by the refresh that recomputes it."""

    repository = models.ForeignKey(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="+"
    )
    day = models.DateField()

    def __str__(self) -> str:
        return f"stale rollup of repository {self.repository_id} on {self.day}"
