from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals and audit"

    def ready(self) -> None:
        # Audit signal receivers, and the executors this app provides.
        from approvals import egress, signals  # noqa: F401
