#!/usr/bin/env python
"""Metrics-page benchmark: the page over 100,000 sessions, 1,000,000 events and 50,000 PRs.

    .venv/bin/python bench/metrics.py     # [--sessions 100000 --events 1000000 --prs 50000]

Same environment rules as bench/stream.py, with its own scratch database
`inspect_bench_metrics` (so it can run beside the other benches) when DATABASE_URL is set, else
SQLite; the given Redis, else an embedded one.

1. Seeds the data with `inspect metrics seed` (20 repositories, 400 users, 180 days), and a
   second data set a tenth of the size under another prefix, then VACUUM ANALYZE (what
   autovacuum does on a live database after bulk inserts: statistics, and the visibility map
   that lets the Metrics statement read sessions from its covering index alone).
2. Times the Metrics page through daphne (first byte, logged-in manager of every repository):
   the default view (overall, last 90 days, per week), the whole 180 days per day, one
   repository, and, as baselines, the same default view over the tenth-size data set and
   /healthz (the server's floor); and the page's model-spend fragment (/metrics/spend/, this
   month's seeded model requests by user, repository, runtime and model).
3. Counts SQL queries in-process (CaptureQueriesContext) for the page on the full and the
   tenth-size data set: the count must not change.
4. Baseline: the same headline figures computed in Python over the fetched rows (what the page
   would cost without aggregating in SQL).

Prints a table, writes var/bench/metrics-<time>.json, and prints the same JSON as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import OUT, Environment, daphne  # noqa: E402
from bench.page import series  # noqa: E402

TARGET_MS = 300
DB_NAME = "inspect_bench_metrics"


def seed(prefix: str, sessions: int, events: int, prs: int) -> dict:
    from metrics.seed import seed_metrics_data

    print(f"seeding {prefix}: {sessions:,} sessions, {events:,} events, {prs:,} PRs ...",
          file=sys.stderr, flush=True)  # fmt: skip
    return seed_metrics_data(sessions=sessions, events=events, prs=prs, repositories=20,
                             users=400, days=180, seed=7, prefix=prefix)  # fmt: skip


def manager_of(prefix: str):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.models import Membership, Role
    from snapshots.models import Repository

    user = get_user_model().objects.create_user(f"{prefix}-manager", password="unused-password")
    Membership.objects.bulk_create(
        Membership(user=user, repository=repo, role=Role.MANAGER)
        for repo in Repository.objects.filter(name__startswith=f"{prefix}-repo-")
    )
    client = Client(HTTP_HOST="127.0.0.1")  # an allowed host, as daphne's requests use
    client.force_login(user)
    return user, client, f"sessionid={client.cookies['sessionid'].value}"


def count_queries(client, path: str) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(path)  # warm
    with CaptureQueriesContext(connection) as captured:
        started = time.perf_counter()
        response = client.get(path)
        elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"{path} answered {response.status_code} in-process")
    return {
        "queries": len(captured.captured_queries),
        "status": response.status_code,
        "in_process_ms": round(elapsed * 1000, 1),
    }


def python_baseline(prefix: str) -> dict:
    """The default view's headline figures computed in Python over fetched rows."""
    from datetime import UTC, datetime, timedelta

    from django.db.models import F

    from metrics.queries import REVIEW_DEFAULT_SECONDS, percentile_cont
    from metrics.scope import DEFAULT_DAYS
    from sessions.models import ReviewEvent, Session

    started = time.perf_counter()
    since = datetime.now(UTC) - timedelta(days=DEFAULT_DAYS)
    rows = list(
        Session.objects.filter(
            repository__name__startswith=f"{prefix}-repo-", created_at__gte=since
        ).values_list(
            "cost_usd",
            "start_ms",
            "pull_request__state",
            "pull_request__additions",
            "pull_request__deletions",
        )  # fmt: skip
    )
    merged = [r for r in rows if r[2] == "merged"]
    effort = sum(
        s or REVIEW_DEFAULT_SECONDS if kind != "viewed" else s
        for kind, s in ReviewEvent.objects.filter(
            pull_request__session__repository__name__startswith=f"{prefix}-repo-",
            pull_request__session__created_at__gte=since,
        ).values_list("kind", F("seconds"))
    )
    figures = {
        "sessions": len(rows),
        "prs": sum(r[2] is not None for r in rows),
        "merged": len(merged),
        "merged_lines": sum(r[3] + r[4] for r in merged),
        "cost": sum(r[0] for r in rows),
        "reviewer_minutes": effort / 60,
        "start_p95_ms": percentile_cont(sorted(r[1] for r in rows if r[1] is not None), 0.95),
    }
    return {"ms": round((time.perf_counter() - started) * 1000, 1), "rows": len(rows),
            "sessions": figures["sessions"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--prs", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()

    with Environment(DB_NAME) as env:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        report: dict = {"environment": env.describe(), "setup": {}}
        started = time.monotonic()
        report["setup"]["full"] = seed("bench", args.sessions, args.events, args.prs)
        report["setup"]["tenth"] = seed(
            "tenth", args.sessions // 10, args.events // 10, args.prs // 10
        )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")
        report["setup"]["seconds"] = round(time.monotonic() - started, 1)

        _, big_client, big_cookie = manager_of("bench")
        _, small_client, small_cookie = manager_of("tenth")
        views = {
            "overall": "/metrics/",
            "overall_180d_day": "/metrics/?period=day&start=" + _days_ago(179),
            "one_repository": "/metrics/?repository=bench-repo-0",
            "csv": "/metrics/?format=csv",
            "spend": "/metrics/spend/",
        }
        report["queries"] = {
            "full_overall": count_queries(big_client, views["overall"]),
            "full_180d_day": count_queries(big_client, views["overall_180d_day"]),
            "full_one_repository": count_queries(big_client, views["one_repository"]),
            "tenth_overall": count_queries(small_client, views["overall"]),
        }
        counts = {row["queries"] for row in report["queries"].values()}
        report["queries_constant"] = len(counts) == 1

        with daphne(env.env, "pubsub") as (_, port):
            print("measuring ...", file=sys.stderr, flush=True)
            report["pages"] = {
                "overall": series(port, views["overall"], big_cookie, args.requests),
                "overall_180d_day": series(
                    port, views["overall_180d_day"], big_cookie, args.requests
                ),
                "one_repository": series(port, views["one_repository"], big_cookie, args.requests),
                "csv": series(port, views["csv"], big_cookie, args.requests),
                "spend": series(port, views["spend"], big_cookie, args.requests),
                "tenth_overall": series(port, views["overall"], small_cookie, args.requests),
                "healthz": series(port, "/healthz", big_cookie, args.requests),
            }
            failed = [k for k, row in report["pages"].items() if row["status"] != [200]]
            if failed:  # the server's log goes with the scratch directory: show it now
                log = Path(env.env["INSPECT_DATA_DIR"]) / "daphne-pubsub.log"
                tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
                print(f"pages not all 200: {failed}; daphne's log ends:\n{tail}", file=sys.stderr)
        report["python_baseline"] = python_baseline("bench")
        pages = report["pages"]
        report["target_met"] = (
            all(pages[k]["p95_ms"] <= TARGET_MS for k in ("overall", "one_repository"))
            and all(pages[k]["status"] == [200] for k in pages)
            and report["queries_constant"]
        )
    report["environment"]["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print_table(report, args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (OUT / f"metrics-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"(written to var/bench/metrics-{stamp}.json)")
    print(json.dumps(report))


def _days_ago(days: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) - timedelta(days=days)).date().isoformat()


def print_table(report: dict, args) -> None:
    env, full = report["environment"], report["setup"]["full"]
    print()
    print(
        f"Metrics page benchmark: {env['database']} ({env['database_url']}), Redis {env['redis']},"
    )
    print(
        f"{env['cpus']} CPUs, load average {env['load_average_at_start']} at start, "
        f"{env['load_average_at_end']} at end; seeded {full['sessions']:,} sessions, "
        f"{full['events']:,} events, {full['prs']:,} PRs, {full['reviews']:,} review events "
        f"(+ a tenth-size set) in {report['setup']['seconds']} s"
    )
    print()
    print(f"  {'request (time to first byte, through daphne)':<56} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'max ms':>7} {'status':>7}")  # fmt: skip
    names = {
        "overall": "Metrics, overall, 90 days per week (default)",
        "overall_180d_day": "Metrics, overall, 180 days per day",
        "one_repository": "Metrics, one repository (the busiest), default",
        "csv": "Metrics CSV, overall, default",
        "spend": "Model spend this month (the page's fragment), overall",
        "tenth_overall": "Metrics, overall, default, 1/10 data (baseline)",
        "healthz": "/healthz (server floor)",
    }
    for key, name in names.items():
        row = report["pages"][key]
        status = ",".join(map(str, row["status"]))
        print(f"  {name:<56} {row['p50_ms']:>7} {row['p95_ms']:>7} {row['max_ms']:>7} {status:>7}")
    baseline = report["python_baseline"]
    print(
        f"  {'figures in Python over fetched rows (baseline, in-process)':<56} {baseline['ms']:>7}"
        f"   ({baseline['rows']:,} rows)"
    )
    print()
    print(f"  {'SQL queries per page (in-process)':<56} {'queries':>7} {'ms':>7}")
    for key, row in report["queries"].items():
        print(f"  {key:<56} {row['queries']:>7} {row['in_process_ms']:>7}")
    print()
    print(
        f"  queries constant across data size, range and scope: "
        f"{'yes' if report['queries_constant'] else 'NO'}; target p95 <= {TARGET_MS} ms: "
        f"{'met' if report['target_met'] else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
