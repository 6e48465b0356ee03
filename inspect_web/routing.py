"""Websocket routes; each app contributes its own."""

websocket_urlpatterns: list = []
