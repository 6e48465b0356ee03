"""Websocket routes of the sessions app (included by inspect_web.routing)."""

from django.urls import path

from sessions.consumers import SessionStreamConsumer

websocket_urlpatterns = [
    path("ws/sessions/<int:session_id>/", SessionStreamConsumer.as_asgi()),
]
