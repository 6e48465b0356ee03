from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "REST API"

    def ready(self) -> None:
        # Imported here, not at module top: they load models, and the app registry is not
        # ready while apps.py is imported.
        from api.stream import scope_token_user
        from sessions.stream.base import register_token_authenticator

        # The session stream's websocket (in sessions, below the API) also takes an API token
        # or a stream ticket; how to read one is the API's.
        register_token_authenticator(scope_token_user)
