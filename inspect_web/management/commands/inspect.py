"""`python manage.py inspect …`: the operator's command line (people, tests and benchmarks).

Each area registers its own subcommands (snapshots/cli.py, …); this file only dispatches.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from snapshots import cli as snapshots_cli

AREAS = [snapshots_cli]


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
        code = handler(self, options)
        if code:
            raise SystemExit(code)
