from django.contrib import admin

from sessions.models import Event, Prompt, PullRequest, Session


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "repository", "creator", "state", "created_at"]
    list_filter = ["state", "repository"]


@admin.register(Prompt)
class PromptAdmin(admin.ModelAdmin):
    list_display = ["session", "order", "author", "state", "created_at"]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["session", "seq", "kind", "created_at"]
    list_filter = ["kind"]


@admin.register(PullRequest)
class PullRequestAdmin(admin.ModelAdmin):
    list_display = ["id", "branch", "repository", "host", "state", "author", "created_at"]
    list_filter = ["state", "host", "repository"]
    # Merges go through the approval gate; the admin only shows what happened.
    readonly_fields = ["state", "merged_at", "merged_by", "merge_sha", "head_sha"]
