from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Repository members"

    def ready(self) -> None:
        # Here, not at module top: roles.py imports models, which need the app registry ready.
        from accounts import roles, social_apps  # noqa: F401  (declares its site settings)

        # Groups mirror the role table after every migrate, so a new permission reaches them.
        post_migrate.connect(roles.on_post_migrate, dispatch_uid="accounts.sync_role_groups")
