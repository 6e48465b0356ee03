"""Websocket routes of the sessions app (included by inspect_web.routing)."""

from django.urls import path, re_path

from sessions.stream.preview_socket import PreviewSocketConsumer
from sessions.stream.session_socket import SessionStreamConsumer
from sessions.stream.terminal_socket import TerminalConsumer

websocket_urlpatterns = [
    path("ws/sessions/<int:session_id>/", SessionStreamConsumer.as_asgi()),
    path("ws/sessions/<int:session_id>/terminal/", TerminalConsumer.as_asgi()),
    # The previewed application's own websockets, at the same paths as its pages.
    re_path(
        r"^sessions/(?P<session_id>\d+)/preview/(?P<path>.*)$", PreviewSocketConsumer.as_asgi()
    ),
]
