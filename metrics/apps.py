from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "metrics"
    verbose_name = "Metrics"

    def ready(self) -> None:
        # In ready(), once the app registry is loaded: the receivers import models.
        from metrics.rollups import connect_marks

        connect_marks()
