from django.contrib import admin

from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEntry


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = ["action", "session", "state", "requested_by", "decided_by", "created_at"]
    list_filter = ["state", "action"]

    # Read-only: a decision goes through approvals.gate (four eyes, audit), never a form here.
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = [
        "seq",
        "created_at",
        "actor_kind",
        "actor_name",
        "action",
        "object_type",
        "object_id",
    ]
    list_filter = ["actor_kind", "action"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(admin.ModelAdmin):
    """Read-only here: a policy is set with `manage.py inspect policy set`, which parses it,
    checks the repository role and audits the change."""

    list_display = ["repository", "updated_by", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
