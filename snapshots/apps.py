from django.apps import AppConfig


class SnapshotsConfig(AppConfig):
    name = "snapshots"
    verbose_name = "Repositories and snapshots"

    def ready(self) -> None:
        # In ready(), once the app registry is loaded (egress imports models): registers the
        # widen_egress executor of the approval gate.
        from snapshots import egress  # noqa: F401
