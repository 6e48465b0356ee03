from django.contrib import admin

from approvals.models import ApprovalRequest, AuditEntry


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = ["action", "session", "state", "requested_by", "decided_by", "created_at"]
    list_filter = ["state", "action"]


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
