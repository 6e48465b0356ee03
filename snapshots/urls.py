from django.urls import path

from snapshots import views

app_name = "snapshots"
urlpatterns = [path("", views.snapshot_list, name="list")]
