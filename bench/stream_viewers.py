"""The viewers' process of the streaming benchmark (bench/stream.py starts it): websocket (JSON
or the page's HTML frames) or plain Redis pub/sub viewers of one or more sessions in one asyncio
process, each tallying order, duplicates and latency.

Runs without Django: only websockets / redis clients, so the viewers' process measures the
stream, not the framework. Prints READY once every viewer is connected, then the result as JSON.

    python bench/stream_viewers.py '<config as JSON>'
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from datetime import datetime

# A log item of the page and the time its event was added (the bench puts "@<time>" in the text).
HTML_ITEM = re.compile(r'<li id="event-\d+" data-seq="(\d+)"[^@]*@(\d+\.\d+)')


def html_events(frame: str) -> list[dict]:
    """The events of an HTML frame, as much of them as the tally needs."""
    return [{"seq": int(s), "payload": {"t": float(t)}} for s, t in HTML_ITEM.findall(frame)]


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


async def _ws_viewer(config: dict, target: str, tally: Tally, ready: asyncio.Queue) -> None:
    import websockets

    html = config.get("format") == "html"
    async with websockets.connect(
        target,
        origin=config["origin"],
        additional_headers={"Cookie": config["cookie"]},
        max_size=None,
        open_timeout=30,
    ) as ws:
        first = await ws.recv()  # JSON: `hello`; HTML: the viewer list
        assert ('id="presence"' in first) if html else json.loads(first)["type"] == "hello", first
        await ready.put(1)
        while tally.next <= config["expected"]:
            raw = await ws.recv()
            now = time.time()
            if html and not raw.startswith("{"):
                tally.take(html_events(raw), now)
                continue
            message = json.loads(raw)
            if message["type"] == "events":
                tally.take(message["events"], now)
            elif message["type"] == "resync":
                tally.resyncs += 1
                return


async def _redis_viewer(config: dict, target: str, tally: Tally, ready: asyncio.Queue) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(config["redis_url"])
    pubsub = client.pubsub()
    await pubsub.subscribe(target)
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
    # `targets`: one websocket URL or Redis channel per session; `viewers` of each.
    targets = [target for target in config["targets"] for _ in range(config["viewers"])]
    tallies = [Tally() for _ in targets]
    ready: asyncio.Queue = asyncio.Queue()
    started = time.monotonic()
    tasks = [
        asyncio.ensure_future(viewer(config, target, t, ready))
        for target, t in zip(targets, tallies, strict=True)
    ]
    for _ in tallies:  # every viewer connected, or one failed to (then say why, and stop)
        getting = asyncio.ensure_future(ready.get())
        await asyncio.wait([getting, *tasks], return_when=asyncio.FIRST_COMPLETED, timeout=60)
        failed = [t for t in tasks if t.done() and t.exception()]
        if failed or not getting.done():
            problem = repr(failed[0].exception()) if failed else "no viewer connected in 60 s"
            print(f"FAILED to connect: {problem}", flush=True)
            raise SystemExit(1)
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


if __name__ == "__main__":
    viewer_process(sys.argv[1])
