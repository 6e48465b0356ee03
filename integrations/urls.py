from django.urls import path

from integrations import views

app_name = "slack"
urlpatterns = [
    path("events/", views.events, name="events"),
    path("commands/", views.command, name="command"),
]
