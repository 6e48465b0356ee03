from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView

from api import stream, views

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("me/", views.MeView.as_view(), name="api-me"),
    path("stream-tickets/", views.StreamTicketView.as_view(), name="api-stream-ticket"),
    path("repositories/", views.RepositoryListView.as_view(), name="api-repositories"),
    path(
        "repositories/<str:name>/refresh/",
        views.SnapshotRefreshView.as_view(),
        name="api-snapshot-refresh",
    ),
    path(
        "repositories/<str:name>/branch/",
        views.RepositoryBranchView.as_view(),
        name="api-repository-branch",
    ),
    path(
        "repositories/<str:name>/archive/",
        views.RepositoryArchiveView.as_view(),
        name="api-repository-archive",
    ),
    path("sessions/", views.SessionListView.as_view(), name="api-sessions"),
    path("sessions/<int:pk>/", views.SessionDetailView.as_view(), name="api-session"),
    path("sessions/<int:pk>/prompts/", views.SessionPromptView.as_view(), name="api-prompts"),
    path("sessions/<int:pk>/stop/", views.SessionStopView.as_view(), name="api-stop"),
    path("sessions/<int:pk>/events/", views.SessionEventsView.as_view(), name="api-events"),
    path(
        "sessions/<int:pk>/events/stream/",
        stream.session_event_stream,
        name="api-event-stream",
    ),
    path("sessions/<int:pk>/diff/", views.SessionDiffView.as_view(), name="api-diff"),
    path("snapshots/", views.SnapshotListView.as_view(), name="api-snapshots"),
    path("approvals/", views.ApprovalListView.as_view(), name="api-approvals"),
    path(
        "approvals/<int:pk>/decide/", views.ApprovalDecideView.as_view(), name="api-approval-decide"
    ),
    path("metrics/summary/", views.MetricsSummaryView.as_view(), name="api-metrics"),
    # Last: anything unmatched (including paths with a newline, which `.` would not match).
    re_path(r"^(?P<path>[\s\S]*)$", views.not_found),
]
