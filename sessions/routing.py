"""Websocket routes of the sessions app (included by inspect_web.routing)."""

from django.urls import path

from sessions.consumers import SessionStreamConsumer
from sessions.terminal import TerminalConsumer

websocket_urlpatterns = [
    path("ws/sessions/<int:session_id>/", SessionStreamConsumer.as_asgi()),
    path("ws/sessions/<int:session_id>/terminal/", TerminalConsumer.as_asgi()),
]
