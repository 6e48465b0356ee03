"""The replay pages of a session's model requests, under /sessions/<id>/ (inspect_web/urls.py)."""

from django.urls import path

from gateway import replay_views

app_name = "model_requests"
urlpatterns = [
    path("<int:pk>/model-requests/", replay_views.request_list, name="list"),
    path("<int:pk>/model-requests/<int:request_pk>/", replay_views.request_detail, name="detail"),
]
