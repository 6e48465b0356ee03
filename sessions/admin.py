from django.contrib import admin

from sessions.models import Event, Prompt, Session


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
