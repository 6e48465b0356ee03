from django.conf import settings


def _admin_items(request) -> list[tuple[str, str]]:
    user = getattr(request, "user", None)
    is_admin = user is not None and user.is_authenticated and (user.is_superuser or user.is_staff)
    return [("budgets:list", "Budgets")] if is_admin else []


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
        "github_login": bool(settings.SOCIALACCOUNT_PROVIDERS.get("github")),
    }
