from django.apps import AppConfig
from django.db.models.signals import post_migrate


class InspectWebConfig(AppConfig):
    name = "inspect_web"
    verbose_name = "Inspect Web"

    def ready(self) -> None:
        from inspect_web import roles

        # Groups mirror the role table after every migrate, so a new permission reaches them.
        post_migrate.connect(roles.on_post_migrate, dispatch_uid="inspect_web.sync_role_groups")
