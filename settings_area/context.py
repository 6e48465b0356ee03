from django.http import HttpRequest

from settings_area.access import is_site_admin, may_open_settings
from settings_area.sections import REPOSITORY_SECTIONS, SITE_SECTIONS


def settings_link(request: HttpRequest) -> dict:
    """Whether the header shows "Settings" (repository and site admins only)."""
    user = getattr(request, "user", None)
    signed_in = user is not None and user.is_authenticated
    # A callable: the template calls it only where the header is drawn.
    return {"settings_link": lambda: signed_in and may_open_settings(user)}


def settings_sections(request: HttpRequest) -> dict:
    """The settings area's tabs (settings_area/sections.py) for its base template."""
    if not request.path.startswith("/settings/"):
        return {}
    user = request.user
    return {
        "settings_site_sections": SITE_SECTIONS if is_site_admin(user) else [],
        "settings_repository_sections": REPOSITORY_SECTIONS,
    }
