"""Websocket routes; each app contributes its own."""

from sessions.routing import websocket_urlpatterns as sessions_websockets

websocket_urlpatterns: list = [*sessions_websockets]
