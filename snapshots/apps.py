from django.apps import AppConfig

from snapshots.egress_settings import egress_settings


class SnapshotsConfig(AppConfig):
    name = "snapshots"
    verbose_name = "Repositories and snapshots"

    def ready(self) -> None:
        # The settings keep the egress entries as written: a bad one stops start-up here.
        egress_settings()
        # The widen_egress executor of the approval gate.
        from snapshots import egress  # noqa: F401
