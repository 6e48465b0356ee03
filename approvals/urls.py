from django.urls import path

from approvals import views

app_name = "approvals"
urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("<int:pk>/", views.approval_detail, name="detail"),
    path("<int:pk>/decide/", views.approval_decide, name="decide"),
    path("audit/", views.audit_log, name="audit"),
    path("audit/<int:pk>/", views.audit_entry, name="audit-entry"),
]
