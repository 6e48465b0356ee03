"""`manage.py inspect metrics …`: the metrics area of the operator's command line."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inspect_web.cli_args import command_parser
from metrics.rollups import rebuild_rollups, refresh_marked
from metrics.seed import seed_metrics_data


def register(areas: argparse._SubParsersAction, command: BaseCommand) -> None:
    metrics = areas.add_parser("metrics", help="metrics data").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    help_text = "seed sessions, events, pull requests and reviews for the Metrics page"
    seed = command_parser(metrics, "seed", metrics_seed, help_text)
    seed.add_argument("--sessions", type=int, default=1000)
    seed.add_argument("--events", type=int, default=10_000)
    seed.add_argument("--prs", type=int, default=500, help="at most one per session")
    seed.add_argument("--repositories", type=int, default=12)
    seed.add_argument("--users", type=int, default=120)
    seed.add_argument("--days", type=int, default=180, help="how far back sessions start")
    seed.add_argument("--seed", type=int, default=7)
    seed.add_argument("--prefix", default="seed", help="name prefix of the seeded rows")
    seed.add_argument("--json", action="store_true")
    help_text = "bring the Metrics page's rollups up to date (--rebuild: recompute every day)"
    rollups = command_parser(metrics, "rollups", metrics_rollups, help_text)
    rollups.add_argument(
        "--rebuild", action="store_true", help="recompute every rollup from the sessions (backfill)"
    )
    rollups.add_argument("--json", action="store_true")


def metrics_rollups(command: BaseCommand, options: dict[str, Any]) -> int:
    started = time.monotonic()
    if options["rebuild"]:
        result = {"rebuilt": True, **rebuild_rollups()}
    else:
        result = {"rebuilt": False, "marks": refresh_marked()}
    result["seconds"] = round(time.monotonic() - started, 1)
    if options["json"]:
        command.stdout.write(json.dumps(result))
    elif options["rebuild"]:
        command.stdout.write(
            f"rebuilt {result['rollups']:,} daily rollups of {result['repositories']} "
            f"repositories ({result['seconds']} s)"
        )
    else:
        command.stdout.write(
            f"recomputed the days of {result['marks']:,} marks ({result['seconds']} s)"
        )
    return 0


def metrics_seed(command: BaseCommand, options: dict[str, Any]) -> int:
    try:
        result = seed_metrics_data(
            sessions=options["sessions"],
            events=options["events"],
            prs=options["prs"],
            repositories=options["repositories"],
            users=options["users"],
            days=options["days"],
            seed=options["seed"],
            prefix=options["prefix"],
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if options["json"]:
        command.stdout.write(json.dumps(result))
    else:
        command.stdout.write(
            f"seeded {result['sessions']:,} sessions, {result['events']:,} events, "
            f"{result['prs']:,} pull requests, {result['reviews']:,} review events, "
            f"{result['model_requests']:,} model requests in "
            f"{result['repositories']} repositories for {result['users']} users "
            f"({result['seconds']} s)"
        )
    return 0
