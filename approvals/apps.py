from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals and audit"

    def ready(self) -> None:
        # Audit signal receivers and the encryption of stored OAuth tokens.
        from approvals import oauth_tokens, signals  # noqa: F401
