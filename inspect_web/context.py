from django.conf import settings

from inspect_web import site_settings
from inspect_web.sealing import SecretsUnavailable


def _admin_items(request) -> list[tuple[str, str]]:
    user = getattr(request, "user", None)
    is_admin = user is not None and user.is_authenticated and (user.is_superuser or user.is_staff)
    return [("budgets:list", "Budgets")] if is_admin else []


def _github_login() -> bool:
    try:
        return bool(
            site_settings.value("GITHUB_OAUTH_CLIENT_ID")
            and site_settings.value("GITHUB_OAUTH_CLIENT_SECRET")
        )
    except SecretsUnavailable:
        return False


def navigation(request) -> dict:
    return {
        "nav_items": [
            ("sessions:list", "Sessions"),
            ("sessions:new", "New task"),
            ("snapshots:list", "Snapshots"),
            ("approvals:inbox", "Approvals"),
            ("automations:list", "Automations"),
            ("metrics", "Metrics"),
            *_admin_items(request),
        ],
        # Callables, read only by a template that uses them. Stored credentials (the GitHub App
        # manifest flow) count as soon as they are saved, as the login page's buttons do.
        "github_login": _github_login,
        # The login page (templates/account/login.html); accounts.identity enforces it.
        "local_passwords_off": lambda: bool(site_settings.value("INSPECT_LOCAL_PASSWORDS_OFF")),
        "break_glass_login": settings.LOCAL_LOGIN == "superuser",
    }
