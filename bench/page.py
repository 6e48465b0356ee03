#!/usr/bin/env python
"""Session-page benchmark: time to first byte of the session viewer for a 50,000-event session.

    .venv/bin/python bench/page.py            # [--events 50000] [--requests 40]

Same environment rules as bench/stream.py (a scratch PostgreSQL database `inspect_bench` when
DATABASE_URL is set, else SQLite; the given Redis, else an embedded one). A daphne subprocess
serves the real page to a logged-in member; the time is from sending the request over TCP to
the first byte of the response (daphne sends the head only once the view has returned, so this
is the whole server-side render).

In the same run, as baselines:
- the same page for a session with 100 events (what a page costs regardless of its log);
- /healthz through the same daphne (the server's floor: ASGI, middleware, no page);
- rendering all 50,000 events in-process (what the page would cost without paging).

Prints a table, writes var/bench/page-<time>.json, and prints the same JSON as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import OUT, Environment, daphne, make_session  # noqa: E402

TARGET_TTFB_MS = 150
LINE = "collected 214 items; tests/test_widgets.py::test_round_trip PASSED [ 42%] (0.013 s)"


def log_of(n: int, turn: int) -> list[tuple[str, dict]]:
    """A realistic mix: mostly output, with tool calls/results, messages, usage, diffs, verify."""
    k = n % 20
    if k == 0:
        return [("tool_call", {"id": f"c{n}", "name": "run_command", "turn": turn,
                               "arguments": {"command": "pytest -q tests/"}})]  # fmt: skip
    if k == 1:
        return [("tool_result", {"id": f"c{n}", "name": "run_command", "ok": True, "turn": turn,
                                 "output": LINE * 8, "duration_ms": 812.5})]  # fmt: skip
    if k == 2:
        return [("agent_message", {"text": "Fixed the off-by-one in the paginator. " * 4,
                                   "turn": turn})]  # fmt: skip
    if k == 3:
        return [("usage", {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.0024,
                           "turn_cost_usd": 0.01, "turn": turn})]  # fmt: skip
    return [("output", {"stream": "stdout", "text": f"{LINE} #{n}", "turn": turn})]


def diff_of(turn: int, files: int = 8) -> list[tuple[str, dict]]:
    patch = "".join(f"-old line {i}\n+new line {i}\n" for i in range(60))
    return [
        ("diff", {"path": f"src/module_{i}.py", "added": 60, "removed": 60, "binary": False,
                  "patch": f"--- a/src/module_{i}.py\n+++ b/src/module_{i}.py\n@@ -1,60 +1,60 @@\n"
                  + patch, "turn": turn, "commit": "0" * 40, "author": "bench"})
        for i in range(files)
    ] + [
        ("command", {"command": "pytest -q", "phase": "verify", "exit_code": 0, "ok": True,
                     "duration_ms": 4100.0, "output_head": LINE * 10, "output_tail": "",
                     "turn": turn})
    ]  # fmt: skip


def fill(session, events: int, turns: int = 10) -> None:
    from sessions.events import append_events
    from sessions.models import Prompt

    per_turn = events // turns
    n = 0
    for turn in range(1, turns + 1):
        prompt = Prompt.objects.create(
            session=session, author=session.creator, order=turn, text=f"task {turn}", state="done"
        )
        asked = {"prompt": prompt.pk, "order": turn, "text": f"task {turn}", "author": "bench"}
        batch: list[tuple[str, dict]] = [("prompt", asked)]
        tail = diff_of(turn)
        while n < per_turn * turn - len(tail) - 1:
            batch += log_of(n, turn)
            n += 1
            if len(batch) >= 1000:
                append_events(session.pk, batch)
                batch = []
        append_events(session.pk, batch + tail)
    remaining = events - session.events.count()
    if remaining > 0:
        append_events(session.pk, [log_of(n + i, turns)[0] for i in range(remaining)])


def ttfb(port: int, path: str, cookie: str) -> tuple[float, int, int]:
    """Seconds from sending the request to the first response byte, the status, the size."""
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"
        "Accept: text/html\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        conn.sendall(request)
        first = conn.recv(1)
        elapsed = time.perf_counter() - started
        rest = first
        while chunk := conn.recv(65536):
            rest += chunk
    status = int(rest.split(b" ", 2)[1])
    return elapsed, status, len(rest)


def series(port: int, path: str, cookie: str, requests: int) -> dict:
    for _ in range(3):  # warm: imports, template cache, connection
        ttfb(port, path, cookie)
    samples, statuses = [], set()
    for _ in range(requests):
        elapsed, status, size = ttfb(port, path, cookie)
        samples.append(elapsed * 1000)
        statuses.add(status)
    samples.sort()
    return {
        "requests": requests,
        "status": sorted(statuses),
        "p50_ms": round(samples[len(samples) // 2], 1),
        "p95_ms": round(samples[min(len(samples) - 1, int(0.95 * len(samples)))], 1),
        "max_ms": round(samples[-1], 1),
        "bytes": size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()

    with Environment() as env:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        from sessions.rendering import render_events
        from sessions.views import PAGE_EVENTS

        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        user = get_user_model().objects.create_user("bench-viewer", password="unused-password")
        client = Client()
        client.force_login(user)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        report: dict = {"environment": env.describe(), "setup": {"events": args.events}}

        print(f"filling a session with {args.events:,} events ...", file=sys.stderr, flush=True)
        big = make_session(40, user)
        started = time.monotonic()
        fill(big, args.events)
        report["setup"]["fill_seconds"] = round(time.monotonic() - started, 1)
        small = make_session(41, user)
        fill(small, 100, turns=1)
        report["setup"]["rendered_per_page"] = PAGE_EVENTS

        with daphne(env.env, "pubsub") as (_, port):
            print("measuring ...", file=sys.stderr, flush=True)
            report["big"] = series(port, big.get_absolute_url(), cookie, args.requests)
            report["small"] = series(port, small.get_absolute_url(), cookie, args.requests)
            report["healthz"] = series(port, "/healthz", cookie, args.requests)

        started = time.perf_counter()
        html = render_events(big.events.order_by("seq").iterator(chunk_size=2000))
        report["render_all"] = {
            "events": big.events.count(),
            "ms": round((time.perf_counter() - started) * 1000, 1),
            "bytes": len(html),
        }
        report["ratio_big_vs_small_p50"] = round(
            report["big"]["p50_ms"] / report["small"]["p50_ms"], 2
        )
        report["target_met"] = report["big"]["p95_ms"] <= TARGET_TTFB_MS and report["big"][
            "status"
        ] == [200]
    report["environment"]["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print_table(report)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (OUT / f"page-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"(written to var/bench/page-{stamp}.json)")
    print(json.dumps(report))


def print_table(report: dict) -> None:
    env, setup = report["environment"], report["setup"]
    print()
    print(
        f"Session page benchmark: {env['database']} ({env['database_url']}), Redis {env['redis']},"
    )
    print(
        f"{env['cpus']} CPUs, load average {env['load_average_at_start']} at start, "
        f"{env['load_average_at_end']} at end; the page renders the newest "
        f"{setup['rendered_per_page']} events"
    )
    print()
    print(f"  {'request (time to first byte, through daphne)':<52} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'max ms':>7} {'status':>7}")  # fmt: skip
    rows = {
        "big": f"session page, {setup['events']:,} events",
        "small": "session page, 100 events (baseline)",
        "healthz": "/healthz (server floor)",
    }
    for key, name in rows.items():
        row = report[key]
        status = ",".join(map(str, row["status"]))
        print(f"  {name:<52} {row['p50_ms']:>7} {row['p95_ms']:>7} {row['max_ms']:>7} {status:>7}")
    everything = report["render_all"]
    print(
        f"  {'render all ' + format(everything['events'], ',') + ' events, in-process':<52}"
        f" {everything['ms']:>7}"
    )
    print()
    print(
        f"  50k-event page / 100-event page (p50): x{report['ratio_big_vs_small_p50']}; "
        f"target p95 <= {TARGET_TTFB_MS} ms: {'met' if report['target_met'] else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
