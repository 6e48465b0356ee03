#!/usr/bin/env python
"""Session start benchmark: the New task form posted over HTTP → the agent's first event at a
websocket viewer, p50 / p95, in one command.

    .venv/bin/python bench/start.py            # [--starts 20] [--pool 2]

Real parts only: daphne (a subprocess) serves the form and the websocket; real Celery workers
(subprocesses) run the turns in real sandboxes (the local backend: run as root) restored from a
snapshot built through the real build path; PostgreSQL and Redis when DATABASE_URL / REDIS_URL
are set (a scratch database `inspect_bench_start`, created and dropped), else SQLite and an
embedded Redis. The client logs in, GETs the form for its CSRF token and POSTs it (no redirect
followed), connects `ws/sessions/<id>/?after=0` and stops the clock at the first `output` event
(the `command` agent's `echo`). One start at a time; between starts the pool (when on) is
allowed to refill, so a warm figure is a start that found a pool sandbox.

Three configurations in the same run:
- baseline: the old path — one prefork worker (2 processes) serving every queue, no pool;
- restore: the turn worker (threads, its own `turns` queue), no pool;
- warm pool: the turn worker plus the general worker filling a pool of `--pool` sandboxes.

Prints a table, writes var/bench/start-<time>.json, and prints the same JSON as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import OUT, ROOT, Environment, daphne  # noqa: E402

TARGETS = {"warm pool": (120, 250), "restore": (250, 400)}  # p50, p95 ms
PASSWORD = "bench-start-password-1"
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}  # fmt: skip
CONFIGS = {
    "baseline": {"workers": [["-Q", "celery,turns", "--concurrency", "2"]], "pool": False},
    "restore": {
        "workers": [["-Q", "turns", "-P", "threads", "--concurrency", "8"]],
        "pool": False,
    },
    "warm pool": {
        "workers": [
            ["-Q", "turns", "-P", "threads", "--concurrency", "8"],
            ["-Q", "celery", "--concurrency", "2"],
        ],
        "pool": True,
    },
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def make_upstream(workdir: Path) -> Path:
    path = workdir / "upstream"
    path.mkdir()
    for i in range(200):
        (path / f"module_{i}.py").write_text(f"def f_{i}(x):\n    return x * {i}\n" * 20)
    (path / "README.md").write_text("# bench\n")
    (path / ".inspect").mkdir()
    (path / ".inspect" / "environment.toml").write_text('verify = ["true"]\n')
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "tree"]):
        subprocess.run(["git", *args], cwd=path, env=GIT_ENV, check=True)
    return path


@contextlib.contextmanager
def workers(env: dict, config: dict, log: Path):
    procs = []
    out = log.open("ab")
    for k, options in enumerate(config["workers"]):
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "inspect_web",
                    "worker",
                    "-l",
                    "warning",
                    "--without-mingle",
                    "--without-gossip",
                    "-n",
                    f"bench{k}-{time.time_ns()}@%h",
                    *options,
                ],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        )
    try:
        yield procs
    finally:
        for process in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in procs:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        out.close()


def log_in(base: str, username: str):
    import requests

    browser = requests.Session()
    browser.get(base + "accounts/login/", timeout=10)
    response = browser.post(
        base + "accounts/login/",
        data={"login": username, "password": PASSWORD,
              "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        headers={"Referer": base + "accounts/login/"},
        timeout=10,
    )  # fmt: skip
    response.raise_for_status()
    return browser


async def first_output(url: str, origin: str, cookie: str) -> float:
    """Connect a viewer and return the time.perf_counter() of the first `output` event."""
    import websockets

    async with websockets.connect(
        url, origin=origin, additional_headers={"Cookie": cookie}, open_timeout=30
    ) as ws:
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if message["type"] == "events" and any(
                e["kind"] == "output" for e in message["events"]
            ):
                return time.perf_counter()


def one_start(browser, base: str, port: int, repository_id: int, k: int) -> tuple[float, int]:
    form = browser.get(base + "sessions/new/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    started = time.perf_counter()
    response = browser.post(
        base + "sessions/new/",
        data={"csrfmiddlewaretoken": token, "repository": repository_id, "agent": "command",
              "agent_command": f"echo start-{k}", "prompt": f"start {k}", "branch": ""},
        headers={"Referer": base + "sessions/new/"},
        allow_redirects=False,
        timeout=30,
    )  # fmt: skip
    if response.status_code != 302:
        raise SystemExit(f"the New task form was refused ({response.status_code})")
    session_id = int(re.search(r"/sessions/(\d+)/", response.headers["Location"]).group(1))
    cookie = "; ".join(f"{c.name}={c.value}" for c in browser.cookies)
    url = f"ws://127.0.0.1:{port}/ws/sessions/{session_id}/?after=0"
    received = asyncio.run(first_output(url, f"http://127.0.0.1:{port}", cookie))
    return (received - started) * 1000, session_id


def wait_idle(session_id: int) -> dict:
    from sessions.models import Session

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        session = Session.objects.get(pk=session_id)
        if session.state in ("idle", "failed"):
            if session.state == "failed":
                raise SystemExit(f"session {session_id} failed: {session.error}")
            return session.timings
        time.sleep(0.05)
    raise SystemExit(f"session {session_id} did not finish")


def wait_pool(repository_id: int, size: int) -> None:
    from sessions import warm_pool

    deadline = time.monotonic() + 60
    while warm_pool.pool_size(repository_id) < size:
        if time.monotonic() > deadline:
            raise SystemExit("the warm pool did not refill within 60 s")
        time.sleep(0.1)


def run_config(name: str, environment, port: int, repository, starts: int, pool: int) -> dict:
    from django.conf import settings

    from sessions import warm_pool

    config = CONFIGS[name]
    pool_env = {
        "INSPECT_POOL_MAX_SANDBOXES": str(pool if config["pool"] else 0),
        "INSPECT_POOL_MIN_PER_REPOSITORY": str(pool if config["pool"] else 0),
    }
    settings.POOL_MAX_SANDBOXES = int(pool_env["INSPECT_POOL_MAX_SANDBOXES"])
    settings.POOL_MIN_PER_REPOSITORY = int(pool_env["INSPECT_POOL_MIN_PER_REPOSITORY"])
    env = {**os.environ, **environment.env, **pool_env}
    base = f"http://127.0.0.1:{port}/"
    browser = log_in(base, "bench")
    samples, timings = [], []
    log = environment.workdir / "workers.log"
    with workers(env, config, log):
        time.sleep(6)  # the workers connect to the broker
        if config["pool"]:
            warm_pool.fill_pools()
        for k in range(starts + 1):
            if config["pool"]:
                wait_pool(repository.pk, pool)
            elapsed, session_id = one_start(browser, base, port, repository.pk, k)
            turn = wait_idle(session_id)
            if k:  # the first start of each configuration warms the processes up
                samples.append(elapsed)
                timings.append(turn)
            time.sleep(0.3)
        warm_pool.drain_pools()
    pooled = sum(1 for t in timings if t.get("pooled"))
    result = {
        "starts": len(samples),
        "p50_ms": percentile(samples, 0.50),
        "p95_ms": percentile(samples, 0.95),
        "pooled_starts": pooled,
        "queue_ms_p50": percentile([t["queue_ms"] for t in timings], 0.5),
        "restore_ms_p50": percentile([t["restore_ms"] for t in timings], 0.5),
        "first_event_ms_p50": percentile([t["first_event_ms"] for t in timings], 0.5),
    }
    if name in TARGETS:
        p50, p95 = TARGETS[name]
        result["target"] = f"p50 <= {p50} ms, p95 <= {p95} ms"
        result["met"] = result["p50_ms"] <= p50 and result["p95_ms"] <= p95
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated configurations")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/start.py needs root: the local sandbox backend mounts overlays")
    with Environment("inspect_bench_start") as environment:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from accounts.models import Membership, Role
        from snapshots.build import snapshot_build
        from snapshots.models import Repository

        call_command("migrate", verbosity=0)
        described = environment.describe()
        user = get_user_model().objects.create_user("bench", password=PASSWORD)
        upstream = make_upstream(environment.workdir)
        repository = Repository.objects.create(name="bench-start", url=str(upstream))
        Membership.objects.create(user=user, repository=repository, role=Role.ADMIN)
        snapshot = snapshot_build(repository)
        if snapshot.state != "ready":
            raise SystemExit(f"the snapshot build failed: {snapshot.log[-2000:]}")
        names = [n for n in CONFIGS if not args.only or n in args.only.split(",")]
        results = {}
        with daphne(environment.env, "pubsub") as (_, port):
            for name in names:
                results[name] = run_config(
                    name, environment, port, repository, args.starts, args.pool
                )
        described["load_average_at_end"] = round(os.getloadavg()[0], 2)
        report = {"benchmark": "start", "environment": described, "results": results}
        print_table(report)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"start-{stamp}.json").write_text(json.dumps(report, indent=2))
        print(json.dumps(report))
    return 0


def print_table(report: dict) -> None:
    env = report["environment"]
    print(f"Start benchmark: {env['database']}, Redis {env['redis']}, {env['cpus']} CPUs, "
          f"load {env['load_average_at_start']} → {env['load_average_at_end']}")  # fmt: skip
    print(f"{'configuration':<12} {'starts':>6} {'p50 ms':>8} {'p95 ms':>8} {'pooled':>6} "
          f"{'queue':>7} {'restore':>8} {'1st ev':>7}  target")  # fmt: skip
    for name, r in report["results"].items():
        target = r.get("target", "(baseline)")
        if "met" in r:
            target += "  met" if r["met"] else "  MISSED"
        print(f"{name:<12} {r['starts']:>6} {r['p50_ms']:>8} {r['p95_ms']:>8} "
              f"{r['pooled_starts']:>6} {r['queue_ms_p50']:>7} {r['restore_ms_p50']:>8} "
              f"{r['first_event_ms_p50']:>7}  {target}")  # fmt: skip
    print(
        "queue / restore / 1st ev: the turn's own timings (p50, ms): prompt row to claim, "
        "sandbox ready, turn start to the agent's first event"
    )


if __name__ == "__main__":
    sys.exit(main())
