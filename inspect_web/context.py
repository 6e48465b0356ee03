from django.conf import settings


def navigation(request) -> dict:
    return {
        "nav_items": [
            ("sessions:list", "Sessions"),
            ("sessions:new", "New task"),
            ("snapshots:list", "Snapshots"),
            ("approvals:inbox", "Approvals"),
            ("automations:list", "Automations"),
            ("metrics", "Metrics"),
        ],
        "github_login": bool(settings.SOCIALACCOUNT_PROVIDERS.get("github")),
    }
