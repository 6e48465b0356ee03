"""Routes into a session's sandbox and files: screenshots, event artifacts and the live preview
(under /sessions/)."""

from django.urls import path, re_path

from sessions import sandbox_views

app_name = "sandbox"
urlpatterns = [
    path("<int:pk>/screenshots/<str:key>.png", sandbox_views.screenshot_image, name="screenshot"),
    path("<int:pk>/artifacts/<str:name>", sandbox_views.event_artifact, name="artifact"),
    path("<int:pk>/preview", sandbox_views.preview_proxy, name="preview-root"),
    re_path(r"^(?P<pk>\d+)/preview/(?P<path>.*)$", sandbox_views.preview_proxy, name="preview"),
]
