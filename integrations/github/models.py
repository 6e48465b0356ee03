"""GitHub's rows. They were sessions' models and keep their tables (`agent_sessions_*`)."""

from __future__ import annotations

from django.db import models


class WebhookDelivery(models.Model):
    """Each X-GitHub-Delivery once: redeliveries are answered but not applied again."""

    delivery_id = models.CharField(max_length=100, unique=True)
    event = models.CharField(max_length=60)
    action = models.CharField(max_length=60, blank=True)
    outcome = models.CharField(max_length=300, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_sessions_webhookdelivery"

    def __str__(self) -> str:
        return f"{self.event} {self.delivery_id}"


class GitHubLink(models.Model):
    """A repository hosted on GitHub: which repository there and the App installation for it.
    Without one, a repository is a local one (branches pushed to its path, reviewed here)."""

    repository_path = "repository"

    repository = models.OneToOneField(
        "snapshots.Repository", on_delete=models.CASCADE, related_name="github"
    )
    full_name = models.CharField(max_length=200, help_text="owner/name on GitHub.")
    installation_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Looked up from the App when empty."
    )

    class Meta:
        db_table = "agent_sessions_githublink"

    def __str__(self) -> str:
        return self.full_name
