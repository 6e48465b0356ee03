"""The operator's egress settings for local sandboxes, parsed: the private addresses sandboxes
may reach (INSPECT_EGRESS_ALLOW_PRIVATE), more networks to refuse (INSPECT_EGRESS_DENY) and the
names the allowlist proxy resolves itself (INSPECT_EGRESS_HOSTS).

The settings keep them as written, because their syntax belongs to the sandbox
(snapshots/sandbox/netns.py), which imports no settings and which the settings do not import.
SnapshotsConfig.ready parses them once at start-up, so a bad entry still stops every process,
naming its variable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.conf import settings

from inspect_web.env import ConfigError
from snapshots.sandbox import netns

T = TypeVar("T")


@dataclass(frozen=True)
class EgressSettings:
    exceptions: tuple[netns.EgressException, ...]
    deny: tuple[netns.IPNetwork, ...]
    hosts: dict[str, str]


def _parsed(variable: str, parse: Callable[[str], T], raw: str) -> T:
    try:
        return parse(raw)
    except ValueError as exc:
        raise ConfigError(variable, str(exc)) from None


def egress_settings() -> EgressSettings:
    """The egress settings in force; ConfigError naming the variable of a bad entry."""
    return EgressSettings(
        exceptions=_parsed(
            "INSPECT_EGRESS_ALLOW_PRIVATE", netns.parse_exceptions, settings.EGRESS_EXCEPTIONS_SPEC
        ),
        deny=_parsed("INSPECT_EGRESS_DENY", netns.parse_networks, settings.EGRESS_DENY_SPEC),
        hosts=_parsed(
            "INSPECT_EGRESS_HOSTS", netns.parse_host_overrides, settings.EGRESS_HOSTS_SPEC
        ),
    )
