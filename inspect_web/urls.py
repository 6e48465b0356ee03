from django.contrib import admin
from django.urls import include, path

from accounts.identity import VerifiedPrimaryEmailView
from inspect_web import health, views
from integrations.github import views as github_views

urlpatterns = [
    path("", views.home, name="home"),
    path("metrics/", include("metrics.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("sessions/", include("sessions.urls")),
    path("sessions/", include("sessions.sandbox_urls")),  # screenshots, live preview
    path("sessions/", include("gateway.replay_urls")),  # a session's model requests
    path("snapshots/", include("snapshots.urls")),
    path("approvals/", include("sessions.approval_urls")),  # approval and audit pages
    path("automations/", include("automations.urls")),
    path("budgets/", include("gateway.urls")),  # model budgets (site admins)
    path("repositories/", include("gateway.policy_urls")),  # allowed models per repository
    path("settings/", include("settings_area.urls")),  # the team's settings (admins)
    path("invitations/", include("settings_area.invitations")),  # an invitation link's page
    path("api/", include("api.urls")),
    path("slack/", include("integrations.urls")),
    path("webhooks/github/", github_views.webhook, name="github-webhook"),
    path("account/tokens/", include("api.account_urls")),
    # Before allauth's own: only a verified address can be made primary.
    path("accounts/email/", VerifiedPrimaryEmailView.as_view(), name="account_email"),
    path("accounts/", include("allauth.urls")),
    path("admin/", admin.site.urls),
]
