"""`python manage.py inspect …`: the operator's command line (people, tests and benchmarks).

Each area registers its own subcommands (snapshots/cli.py, …); this file only dispatches.
"""

from __future__ import annotations

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from approvals import cli as approvals_cli
from gateway import cli as gateway_cli
from inspect_web.embedded_redis import ensure_embedded_redis
from integrations.github import cli as github_cli
from metrics import cli as metrics_cli
from sessions import cli as sessions_cli
from snapshots import cli as snapshots_cli
from snapshots import controls_cli as snapshots_controls_cli

AREAS = [
    snapshots_cli,
    sessions_cli,
    github_cli,
    approvals_cli,
    snapshots_controls_cli,
    metrics_cli,
    gateway_cli,
]


class Command(BaseCommand):
    help = "Inspect Web: repositories, snapshots, sandboxes, sessions and audit."

    def add_arguments(self, parser) -> None:
        areas = parser.add_subparsers(dest="area", metavar="AREA", required=True)
        for area in AREAS:
            area.register(areas, self)

    def handle(self, *args, **options) -> None:
        handler = options.get("handler")
        if handler is None:
            raise CommandError("choose a subcommand; see `python manage.py inspect --help`")
        if settings.EMBEDDED_REDIS:
            # Without `make run` nothing else has started it; it is shared and stays up.
            ensure_embedded_redis(settings.EMBEDDED_REDIS_DIR)
        try:
            code = handler(self, options)
        except redis.ConnectionError as exc:
            raise CommandError(
                f"REDIS_URL: cannot reach Redis at {settings.REDIS_URL}: {exc}"
            ) from None
        if code:
            raise SystemExit(code)
