from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals and audit"

    def ready(self) -> None:
        # In ready(), once the app registry is loaded (these import models): audit signal
        # receivers, the encryption of stored OAuth tokens, and the `loosen_policy` executor.
        from approvals import oauth_tokens, policy_change, signals  # noqa: F401
