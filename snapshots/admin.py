from django.contrib import admin

from accounts.admin import MembershipInline
from snapshots.models import Repository, Snapshot


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "default_branch", "created_at"]
    inlines = [MembershipInline]


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ["repository", "branch", "commit", "state", "build_seconds", "created_at"]
    list_filter = ["state", "repository"]
