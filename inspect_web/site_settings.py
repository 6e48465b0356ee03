"""Settings an admin changes at run time: one place to declare them, read them and say which
source is in force.

A deployer fixes a setting with its environment variable (read into Django's settings at start);
an admin sets it on the settings pages (a `SiteSetting` row, sealed when secret). The
environment wins, so a deployment that pins a value keeps it; the page shows which is in force.
Callers that change a setting audit the change (this layer knows no audit log).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings

from inspect_web.models import SiteSetting
from inspect_web.sealing import seal, unseal

ENVIRONMENT = "environment"
SETTINGS_PAGE = "settings page"
DEFAULT = "default"
CACHE_SECONDS = 2.0  # the gateway reads provider keys per request; a change shows within this


@dataclass(frozen=True)
class Declared:
    name: str  # the environment variable, and the Django setting unless `setting` says otherwise
    label: str
    secret: bool = False
    default: str = ""
    setting: str = ""

    @property
    def setting_name(self) -> str:
        return self.setting or self.name


@dataclass(frozen=True)
class InForce:
    value: str
    source: str  # ENVIRONMENT, SETTINGS_PAGE or DEFAULT


_declared: dict[str, Declared] = {}
_cache: dict[str, tuple[float, str | None]] = {}
_lock = threading.Lock()


def declare(
    name: str, *, label: str, secret: bool = False, default: str = "", setting: str = ""
) -> Declared:
    """Declare a run-time setting (each owner declares its own at import)."""
    declared = Declared(name, label, secret, default, setting)
    _declared[name] = declared
    return declared


def declared(name: str) -> Declared:
    try:
        return _declared[name]
    except KeyError:
        raise KeyError(f"{name} is not a declared site setting") from None


def _environment(item: Declared) -> str:
    value = getattr(settings, item.setting_name, "")
    value = "" if value is None else str(value)
    return value if value and value != item.default else ""


def _stored(name: str) -> str | None:
    now = time.monotonic()
    with _lock:
        hit = _cache.get(name)
        if hit and now - hit[0] < CACHE_SECONDS:
            return hit[1]
    row = SiteSetting.objects.filter(name=name).values_list("value", flat=True).first()
    with _lock:
        _cache[name] = (now, row)
    return row


def in_force(name: str) -> InForce:
    """The value in force and where it comes from. SecretsUnavailable if a stored secret
    cannot be decrypted."""
    item = declared(name)
    env_value = _environment(item)
    if env_value:
        return InForce(env_value, ENVIRONMENT)
    stored = _stored(name)
    if stored:
        return InForce(unseal(stored) if item.secret else stored, SETTINGS_PAGE)
    return InForce(item.default, DEFAULT)


def value(name: str) -> str:
    return in_force(name).value


def store(name: str, new_value: str, *, by=None) -> None:
    """Keep `new_value` for `name` (sealed when secret); an empty value removes the row."""
    item = declared(name)
    if not new_value:
        SiteSetting.objects.filter(name=name).delete()
    else:
        SiteSetting.objects.update_or_create(
            name=name,
            defaults={"value": seal(new_value) if item.secret else new_value, "updated_by": by},
        )
    forget(name)


def forget(name: str | None = None) -> None:
    """Drop cached reads (all of them without a name), e.g. after a change or in tests."""
    with _lock:
        if name is None:
            _cache.clear()
        else:
            _cache.pop(name, None)
