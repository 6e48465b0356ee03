from django.apps import AppConfig


class InspectWebConfig(AppConfig):
    name = "inspect_web"
    verbose_name = "Inspect Web"
