"""/approvals/: the approval pages (sessions.approval_pages) and the audit log pages
(approvals.views), under the one `approvals` namespace."""

from django.urls import path

from approvals import views as audit_pages
from sessions import approval_pages

app_name = "approvals"
urlpatterns = [
    path("", approval_pages.inbox, name="inbox"),
    path("<int:pk>/", approval_pages.approval_detail, name="detail"),
    path("<int:pk>/decide/", approval_pages.approval_decide, name="decide"),
    path("audit/", audit_pages.audit_log, name="audit"),
    path("audit/<int:pk>/", audit_pages.audit_entry, name="audit-entry"),
]
