from django.apps import AppConfig


class SettingsAreaConfig(AppConfig):
    name = "settings_area"
    verbose_name = "Settings"
