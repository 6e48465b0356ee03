"""GitHub's rows in the Django admin (registered by integrations.admin, the app's admin module)."""

from django.contrib import admin

from integrations.github.models import GitHubLink, WebhookDelivery


@admin.register(GitHubLink)
class GitHubLinkAdmin(admin.ModelAdmin):
    list_display = ["repository", "full_name", "installation_id"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["delivery_id", "event", "action", "outcome", "received_at"]
    list_filter = ["event"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False
