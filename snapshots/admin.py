from django.contrib import admin

from accounts.admin import MembershipInline
from snapshots.models import Repository, Snapshot


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "default_branch", "created_at"]
    inlines = [MembershipInline]
    # A recipe's egress may only widen through the approval gate (`manage.py inspect recipe
    # set`), so the form shows the override but does not let anyone edit it in place.
    readonly_fields = ["recipe_override", "approved_egress", "egress_approved_at"]


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ["repository", "branch", "commit", "state", "build_seconds", "created_at"]
    list_filter = ["state", "repository"]
