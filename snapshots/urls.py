from django.urls import path

from snapshots import views

app_name = "snapshots"
urlpatterns = [
    path("", views.snapshot_list, name="list"),
    path("<int:pk>/", views.snapshot_detail, name="detail"),
    path("refresh/<slug:repository>/", views.snapshot_refresh, name="refresh"),
]
