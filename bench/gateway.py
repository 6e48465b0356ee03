#!/usr/bin/env python
"""Model gateway benchmark: what the gateway adds to a streamed model call.

    .venv/bin/python bench/gateway.py      # [--requests 300] [--concurrent 200] [--tokens 500]

Same environment rules as bench/stream.py (a scratch PostgreSQL database when DATABASE_URL is
set, else SQLite; the given Redis, else an embedded one). A stand-in provider
(tests/standin_model/paced.py, its own process) streams `--tokens` Anthropic text deltas per
response; the gateway (`python -m gateway.server`, its own process, metering every request into
the database) sits in front of it with a real turn token.

1. Time to first token (the first `content_block_delta`), one request at a time, alternating a
   direct call to the provider (the same-run baseline) and a call through the gateway, each on
   its own keep-alive connection. Added TTFT = gateway percentile - direct percentile
   (targets: p50 <= 5 ms, p99 <= 20 ms).
2. `--concurrent` streams at once through the gateway (none may fail: status 200, every token,
   the stream's end), then the same directly; the gateway's CPU time for the whole phase
   (its recording of every request included) per 1,000 streamed tokens.

Prints a table, writes var/bench/gateway-<time>.json, and prints the same JSON as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import OUT, Environment, free_port, make_session  # noqa: E402

TARGET_P50_MS, TARGET_P99_MS = 5.0, 20.0
KEY = "sk-bench-provider-key"
BODY = json.dumps(
    {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True,
     "messages": [{"role": "user", "content": "Write five hundred words."}]}
).encode()  # fmt: skip
FIRST_TOKEN = b"event: content_block_delta"


class Stream:
    """A keep-alive HTTP/1.1 connection sending the streamed request and timing its answer."""

    def __init__(self, port: int, path: str, key: str) -> None:
        self.port, self.path, self.key = port, path, key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def call(self) -> tuple[float, int, bool]:
        """(time to first token in ms, tokens, complete)."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (
            f"POST {self.path} HTTP/1.1\r\nhost: bench\r\nx-api-key: {self.key}\r\n"
            f"anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n"
            f"content-length: {len(BODY)}\r\n\r\n"
        ).encode()
        started = time.perf_counter()
        self.writer.write(head + BODY)
        # De-chunked as it comes: a proxy may cut an event across two chunks.
        raw, body, pos, ttft, status_ok = bytearray(), bytearray(), -1, None, False
        while True:
            chunk = await self.reader.read(65536)
            if not chunk:
                self.writer = None
                return ttft or 0.0, body.count(FIRST_TOKEN), False
            raw += chunk
            if pos < 0:
                end = raw.find(b"\r\n\r\n")
                if end < 0:
                    continue
                head_lines = bytes(raw[:end]).lower()
                status_ok = head_lines.startswith(b"http/1.1 200")
                if b"transfer-encoding: chunked" not in head_lines:
                    self.writer.close()  # not a stream: count it failed, start afresh
                    self.writer = None
                    return 0.0, 0, False
                pos = end + 4
            while (line_end := raw.find(b"\r\n", pos)) >= 0:
                size = int(bytes(raw[pos:line_end]).split(b";")[0], 16)
                if len(raw) < line_end + 2 + size + 2:
                    break
                if size == 0:
                    ok = status_ok and b"message_stop" in body
                    return ttft or 0.0, body.count(FIRST_TOKEN), ok
                body += raw[line_end + 2 : line_end + 2 + size]
                pos = line_end + 2 + size + 2
            if ttft is None and FIRST_TOKEN in body:
                ttft = (time.perf_counter() - started) * 1000

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict:
    return {"p50_ms": round(percentile(values, 50), 2), "p99_ms": round(percentile(values, 99), 2),
            "mean_ms": round(statistics.fmean(values), 2), "n": len(values)}  # fmt: skip


async def sequential(direct: Stream, gateway: Stream, requests: int) -> dict:
    for stream in (direct, gateway):  # warm both connections (and the gateway's token cache)
        for _ in range(5):
            await stream.call()
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    failures = 0
    for _ in range(requests):
        for name, stream in (("direct", direct), ("gateway", gateway)):
            ttft, _, ok = await stream.call()
            times[name].append(ttft)
            failures += not ok
    direct.close(), gateway.close()
    return {name: summary(values) for name, values in times.items()} | {"failures": failures}


async def concurrent(port: int, path: str, key: str, count: int, tokens: int) -> dict:
    streams = [Stream(port, path, key) for _ in range(count)]
    started = time.perf_counter()
    results = await asyncio.gather(*(s.call() for s in streams), return_exceptions=True)
    seconds = time.perf_counter() - started
    for s in streams:
        s.close()
    good = [r for r in results if isinstance(r, tuple) and r[2] and r[1] == tokens]
    bad = [r for r in results if not (isinstance(r, tuple) and r[2] and r[1] == tokens)]
    ttfts = [r[0] for r in good] or [0.0]
    return {"streams": count, "failed": count - len(good), "seconds": round(seconds, 2),
            "tokens": sum(r[1] for r in good), "ttft": summary(ttfts),
            "failures": [repr(r)[:200] for r in bad[:3]]}  # fmt: skip


def wait_up(port: int, process: subprocess.Popen, what: str) -> None:
    import socket  # why: only the start-up probe needs it

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=500)
    args = parser.parse_args()

    with Environment(db_name="inspect_bench_gateway") as env:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from gateway.models import ModelRequest
        from sessions import model_access
        from sessions.models import Prompt

        call_command("migrate", interactive=False, verbosity=0)
        user = get_user_model().objects.create_user("bench-gateway", password="unused-password")
        session = make_session(60, user)
        prompt = Prompt.objects.create(session=session, author=user, text="bench", order=1)
        token = model_access.mint(session, prompt, "claude-code")
        report: dict = {"environment": env.describe(),
                        "setup": {"tokens_per_response": args.tokens, "requests": args.requests,
                                  "concurrent": args.concurrent}}  # fmt: skip

        upstream_port, gateway_port = free_port(), free_port()
        child_env = {**os.environ, **env.env}
        logs = open(OUT / "gateway-processes.log", "wb")  # noqa: SIM115 - kept after the run
        upstream = subprocess.Popen(
            [sys.executable, "-m", "tests.standin_model.paced", "--port", str(upstream_port),
             "--tokens", str(args.tokens), "--key", KEY],
            cwd=ROOT, env=child_env, stdout=logs, stderr=subprocess.STDOUT,
        )  # fmt: skip
        profile = os.environ.get("BENCH_PROFILE_GATEWAY")  # a path: cProfile the gateway into it
        prefix = ["-m", "cProfile", "-o", profile] if profile else []
        gateway = subprocess.Popen(
            [sys.executable, *prefix, "-m", "gateway.server"], cwd=ROOT, stdout=logs,
            stderr=subprocess.STDOUT,
            env={**child_env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{upstream_port}",
                 "ANTHROPIC_API_KEY": KEY, "INSPECT_GATEWAY_PORT": str(gateway_port),
                 "INSPECT_GATEWAY_SOCKET": str(Path(env.workdir) / "gateway" / "gateway.sock")},
        )  # fmt: skip
        try:
            wait_up(upstream_port, upstream, "the stand-in provider")
            wait_up(gateway_port, gateway, "the gateway")
            direct = Stream(upstream_port, "/v1/messages", KEY)
            through = Stream(gateway_port, "/anthropic/v1/messages", token)
            print("measuring time to first token ...", file=sys.stderr, flush=True)
            report["ttft"] = asyncio.run(sequential(direct, through, args.requests))
            while ModelRequest.objects.count() < 5 + args.requests:  # warm-up included
                time.sleep(0.1)

            print(f"{args.concurrent} concurrent streams ...", file=sys.stderr, flush=True)
            process = psutil.Process(gateway.pid)
            before = ModelRequest.objects.count()
            cpu = process.cpu_times()
            report["through_gateway"] = asyncio.run(
                concurrent(gateway_port, "/anthropic/v1/messages", token, args.concurrent,
                           args.tokens)
            )  # fmt: skip
            deadline = time.monotonic() + 60
            while (
                ModelRequest.objects.count() < before + args.concurrent
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)
            after = process.cpu_times()
            cpu_seconds = (after.user - cpu.user) + (after.system - cpu.system)
            report["direct"] = asyncio.run(
                concurrent(upstream_port, "/v1/messages", KEY, args.concurrent, args.tokens)
            )
            streamed = report["through_gateway"]["tokens"]
            report["gateway_cpu"] = {
                "seconds": round(cpu_seconds, 3),
                "ms_per_1000_tokens": round(cpu_seconds * 1000 / max(streamed, 1) * 1000, 2),
                "records_written": ModelRequest.objects.count() - before,
            }
        finally:
            for child in (gateway, upstream):
                child.send_signal(signal.SIGINT) if child is gateway else child.terminate()
                child.wait(10)
            logs.close()

        ttft = report["ttft"]
        report["added_ttft_ms"] = {
            "p50": round(ttft["gateway"]["p50_ms"] - ttft["direct"]["p50_ms"], 2),
            "p99": round(ttft["gateway"]["p99_ms"] - ttft["direct"]["p99_ms"], 2),
        }
        report["targets"] = {"added_p50_ms": TARGET_P50_MS, "added_p99_ms": TARGET_P99_MS}
        report["target_met"] = (
            report["added_ttft_ms"]["p50"] <= TARGET_P50_MS
            and report["added_ttft_ms"]["p99"] <= TARGET_P99_MS
            and report["through_gateway"]["failed"] == 0
            and ttft["failures"] == 0
        )
    report["environment"]["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print_table(report)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (OUT / f"gateway-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"(written to var/bench/gateway-{stamp}.json)")
    print(json.dumps(report))


def print_table(report: dict) -> None:
    ttft, added = report["ttft"], report["added_ttft_ms"]
    through, direct, cpu = report["through_gateway"], report["direct"], report["gateway_cpu"]
    rows = [
        ("TTFT direct p50 / p99 (ms)", f"{ttft['direct']['p50_ms']} / {ttft['direct']['p99_ms']}"),
        ("TTFT via gateway p50 / p99 (ms)",
         f"{ttft['gateway']['p50_ms']} / {ttft['gateway']['p99_ms']}"),
        ("added TTFT p50 (target <= 5 ms)", f"{added['p50']}"),
        ("added TTFT p99 (target <= 20 ms)", f"{added['p99']}"),
        (f"{through['streams']} concurrent via gateway: failed", f"{through['failed']}"),
        ("  ... wall time (s) / TTFT p50 / p99 (ms)",
         f"{through['seconds']} / {through['ttft']['p50_ms']} / {through['ttft']['p99_ms']}"),
        (f"{direct['streams']} concurrent direct: failed", f"{direct['failed']}"),
        ("  ... wall time (s) / TTFT p50 / p99 (ms)",
         f"{direct['seconds']} / {direct['ttft']['p50_ms']} / {direct['ttft']['p99_ms']}"),
        ("gateway CPU per 1,000 streamed tokens (ms)", f"{cpu['ms_per_1000_tokens']}"),
        ("records written in the concurrent phase", f"{cpu['records_written']}"),
        ("target met", str(report["target_met"])),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
