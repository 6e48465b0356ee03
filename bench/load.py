"""Load with faults (issue 19): concurrent sessions, each watched by several viewers, while a
worker is killed with -9, Redis is restarted and PostgreSQL is restarted, once each.

    .venv/bin/python bench/load.py [--sessions 20] [--viewers 10] [--minutes 10]

Everything runs on servers of its own, in a throwaway directory under var/bench/: a private
PostgreSQL (initdb + pg_ctl, as the postgres user, on a port in 8900-8999:
tests/private_postgres.py) and the embedded Redis, so both can be restarted; daphne, two Celery
workers and beat as `make run` starts them; local sandboxes. Each session keeps getting prompts
(a command agent printing a line every 0.25 s for 10 s) until the time is up; each viewer follows
its session's websocket the way the session page does (reconnecting with its last seq after any
close). At 30 %, 50 % and
70 % of the run: kill -9 of a worker (a replacement starts, as an operator's supervisor would),
a Redis restart, a PostgreSQL restart. Checked: every session finishes (every prompt done, the
session idle or with its pull request open); every viewer got every event exactly once, in order;
no pull request was opened twice. Latency (event row's created_at to receipt) p99 for the calm
part (before the first fault: the baseline) and for the minute after each fault. Prints a table
and, last, JSON (also written to var/bench/load.json).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import OUT, _die_with_parent, _exit_on_sigterm, free_port  # noqa: E402
from tests.private_postgres import PrivatePostgres  # noqa: E402

TURN_LINES = 40
AGENT = (
    f"for i in $(seq 1 {TURN_LINES}); do echo line-$i; sleep 0.25; done; date +%s%N >> turns.txt"
)
FAULT_AT = {"worker_killed": 0.3, "redis_restarted": 0.5, "postgres_restarted": 0.7}
FAULT_WINDOW = 60.0  # seconds after a fault counted as "faulty"


class Viewers:
    """All viewers in one asyncio loop on a thread of their own."""

    def __init__(self, port: int, cookie: str, session_ids: list[int], per_session: int) -> None:
        self.port, self.cookie = port, cookie
        self.seqs = {(s, v): [] for s in session_ids for v in range(per_session)}
        self.latencies: list[tuple[float, float]] = []  # (received at, latency s)
        self.closes: list[int | None] = []
        self.target: dict[int, int] = {}  # seq each viewer must reach before it stops
        self.stop = False
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._all(),))

    async def _all(self) -> None:
        await asyncio.gather(*(self._follow(s, v) for s, v in self.seqs))

    async def _follow(self, session_id: int, viewer: int) -> None:
        import websockets

        seqs = self.seqs[(session_id, viewer)]
        url = f"ws://127.0.0.1:{self.port}/ws/sessions/{session_id}/"
        backoff = 0.2
        while not (self.stop and seqs and seqs[-1] >= self.target.get(session_id, 0)):
            try:
                async with websockets.connect(
                    f"{url}?after={seqs[-1] if seqs else 0}",
                    origin=f"http://127.0.0.1:{self.port}",
                    additional_headers={"Cookie": self.cookie},
                    open_timeout=20,
                    max_size=None,
                ) as ws:
                    backoff = 0.2
                    while True:
                        message = json.loads(await asyncio.wait_for(ws.recv(), 2))
                        now = time.time()
                        if message["type"] != "events":
                            continue
                        for event in message["events"]:
                            seqs.append(event["seq"])
                            created = datetime.fromisoformat(event["created_at"]).timestamp()
                            self.latencies.append((now, now - created))
            except TimeoutError:
                continue  # quiet: look at `stop` and go on reading (reconnecting is harmless)
            except websockets.ConnectionClosed as closed:
                self.closes.append(closed.rcvd.code if closed.rcvd else None)
            except (OSError, websockets.InvalidHandshake):
                pass
            await asyncio.sleep(backoff)
            backoff = min(3.0, backoff * 2)

    def start(self) -> None:
        self.thread.start()

    def finish(self, last: dict[int, int], timeout: float) -> None:
        self.target, self.stop = last, True
        self.thread.join(timeout)


class Run:
    """The servers of one run, each restartable, all stopped at the end."""

    def __init__(self, workdir: Path, workers: int, concurrency: int) -> None:
        self.workdir, self.workers, self.concurrency = workdir, workers, concurrency
        self.pg = PrivatePostgres()
        self.redis = None
        self.children: dict[str, subprocess.Popen] = {}
        self.port = free_port()

    def env(self) -> dict[str, str]:
        return {
            "DJANGO_SETTINGS_MODULE": "inspect_web.settings",
            "DATABASE_URL": self.pg.url("inspect_load"),
            "INSPECT_DATA_DIR": str(self.workdir),
            "INSPECT_SANDBOX_ROOT": str(self.workdir / "sandbox"),
            "PYTHONPATH": str(ROOT),
        }

    def start_redis(self) -> None:
        from inspect_web.embedded_redis import ensure_embedded_redis  # after django.setup()

        self.redis = ensure_embedded_redis(
            self.workdir, detach=False, start_new_session=True, preexec_fn=_die_with_parent
        )

    def stop_redis(self) -> None:
        if self.redis is not None and self.redis.process is not None:
            self.redis.process.kill()
            self.redis.process.wait()

    def spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - the child writes it
        self.children[name] = subprocess.Popen(
            [sys.executable, *argv], env={**os.environ, **self.env()}, cwd=ROOT, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip

    def start_worker(self, name: str) -> None:
        from django.conf import settings  # after django.setup()

        node = f"{name}-{os.getpid()}@%h"
        self.spawn(name, ["-m", "celery", "-A", "inspect_web", "worker", "-l", "info",
                          "-Q", f"celery,{settings.TURN_QUEUE}",
                          "--concurrency", str(self.concurrency), "-n", node])  # fmt: skip

    def start_all(self) -> None:
        from inspect_web.supervisor import daphne_command  # after django.setup()

        self.spawn("daphne", daphne_command(sys.executable, "127.0.0.1", self.port)[1:])
        for n in range(self.workers):
            self.start_worker(f"worker{n}")
        self.spawn("beat", ["-m", "celery", "-A", "inspect_web", "beat", "-l", "info",
                            "--schedule", str(self.workdir / "celerybeat-schedule")])  # fmt: skip

    def crashed(self) -> dict[str, str]:
        """Children that exited by themselves, with the last error line of their log."""
        out = {}
        for name, child in self.children.items():
            if child.poll() is not None:
                lines = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()
                errors = [line for line in lines if "Unrecoverable" in line or "Error" in line]
                out[name] = (errors or lines or ["(no output)"])[-1][-300:]
        return out

    def workers_alive(self) -> bool:
        return any(
            child.poll() is None for name, child in self.children.items() if "worker" in name
        )

    def kill_worker(self) -> None:
        worker = self.children.pop("worker0")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        self.start_worker("worker0b")

    def close(self) -> None:
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
        for child in self.children.values():
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        with contextlib.suppress(Exception):  # never leave a sandbox or mount behind
            from snapshots.backends import sandbox_backend  # after django.setup()

            backend = sandbox_backend()
            for sandbox_id in backend.list_sandboxes():
                backend.attach(sandbox_id).terminate()
            backend.reap()
        self.stop_redis()
        self.pg.close()


def p99(samples: list[float]) -> float | None:
    if not samples:
        return None
    samples = sorted(samples)
    return round(samples[min(len(samples) - 1, int(0.99 * len(samples)))] * 1000, 1)


def retrying(fn, *args, **kwargs):
    """Run an ORM call, waiting out a database restart (the bench's own connection is cut too)."""
    from django.db import InterfaceError, OperationalError, connection

    deadline = time.monotonic() + 120
    while True:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            with contextlib.suppress(Exception):
                connection.close()
            time.sleep(0.5)


def make_upstream(workdir: Path) -> Path:
    upstream = workdir / "upstream"
    upstream.mkdir()
    (upstream / "README.md").write_text("# load\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}  # fmt: skip
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "initial"]):
        subprocess.run(["git", *argv], cwd=upstream, env=env, check=True)
    return upstream


def setup(run: Run, sessions: int):
    """The database, a repository with a ready snapshot, a user and their browser cookie."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from accounts.models import Membership
    from snapshots.build import snapshot_build
    from snapshots.models import Repository

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("loader", password="not used")
    repository = Repository.objects.create(name="load", url=str(make_upstream(run.workdir)))
    Membership.objects.create(user=user, repository=repository, role="engineer")
    snapshot = snapshot_build(repository)
    if snapshot.state != "ready":
        raise SystemExit(f"the snapshot build failed: {snapshot.error}")
    client = Client()
    client.force_login(user)
    return user, repository, f"sessionid={client.cookies['sessionid'].value}"


def drive(run: Run, sessions: list, user, seconds: float) -> dict[str, float]:
    """Keep every session busy until the time is up, with the faults on schedule."""
    from sessions import services
    from sessions.models import Prompt, Session

    faults = {name: at * seconds for name, at in FAULT_AT.items()}
    done: dict[str, float] = {}
    started = time.monotonic()
    n = 0
    while (elapsed := time.monotonic() - started) < seconds:
        for name, at in faults.items():
            if name not in done and elapsed >= at:
                done[name] = time.time()
                print(f"  {elapsed:5.0f} s  {name.replace('_', ' ')}", flush=True)
                if name == "worker_killed":
                    run.kill_worker()
                elif name == "redis_restarted":
                    run.stop_redis()
                    time.sleep(2)
                    run.start_redis()
                else:
                    run.pg.restart(down_seconds=2)

        def queue_more() -> None:
            nonlocal n
            pending = set(
                Prompt.objects.filter(
                    session__in=sessions, state__in=["queued", "running"]
                ).values_list("session_id", flat=True)
            )
            for session in Session.objects.filter(pk__in=[s.pk for s in sessions]):
                if session.pk not in pending:
                    n += 1
                    services.prompt_queue(session=session, author=user, text=f"turn {n}")

        retrying(queue_more)
        time.sleep(1)
    return done


def settle(run: Run, sessions: list, timeout: float) -> dict[int, int]:
    """Wait for every prompt to finish (not past the last worker's death); the last seq of
    each session."""
    from django.db.models import Max

    from sessions.models import Event, Prompt

    deadline = time.monotonic() + timeout
    while retrying(
        lambda: Prompt.objects.filter(
            session__in=sessions, state__in=["queued", "running"]
        ).exists()
    ):
        if time.monotonic() > deadline or not run.workers_alive():
            break
        time.sleep(1)
    rows = retrying(
        lambda: dict(
            Event.objects.filter(session__in=sessions)
            .values_list("session_id")
            .annotate(Max("seq"))
            .values_list("session_id", "seq__max")
        )
    )
    return {s.pk: rows.get(s.pk, 0) for s in sessions}


def check(sessions: list, viewers: Viewers, last: dict[int, int]) -> dict:
    from django.db.models import Count

    from sessions.models import Event, Prompt, PullRequest, Session

    ids = [s.pk for s in sessions]
    prompts = dict(
        Prompt.objects.filter(session__in=ids).values_list("state").annotate(Count("id"))
    )
    states = dict(Session.objects.filter(pk__in=ids).values_list("state").annotate(Count("id")))
    busy = Prompt.objects.filter(session__in=ids, state__in=["queued", "running"])
    unfinished = (
        Session.objects.filter(pk__in=ids).exclude(state__in=["idle", "pr_open"]).count()
        + Session.objects.filter(pk__in=ids, state__in=["idle", "pr_open"], prompts__in=busy)
        .distinct()
        .count()
    )
    pulls = PullRequest.objects.filter(session__in=ids).values("session").annotate(n=Count("id"))
    opened = (
        Event.objects.filter(session__in=ids, kind="pull_request_published", payload__opened=True)
        .values("session")
        .annotate(n=Count("id"))
    )
    exact = sum(seqs == list(range(1, last[s] + 1)) for (s, _), seqs in viewers.seqs.items())
    return {
        "sessions_finished": len(ids) - unfinished,
        "failures": sorted(
            {
                e
                for e in Session.objects.filter(pk__in=ids, state="failed").values_list(
                    "error", flat=True
                )
            }
        ),
        "session_states": states,
        "prompts": prompts,
        "viewers_exact": exact,
        "viewers": len(viewers.seqs),
        "events": sum(last.values()),
        "deliveries": sum(len(seqs) for seqs in viewers.seqs.values()),
        "pull_requests": sum(p["n"] for p in pulls),
        "pull_requests_opened_twice": sum(1 for p in pulls if p["n"] > 1)
        + sum(1 for o in opened if o["n"] > 1),
        "closes": {str(c): viewers.closes.count(c) for c in sorted(set(viewers.closes), key=str)},
    }


def latency(viewers: Viewers, start: float, faults: dict[str, float]) -> dict:
    first = min(faults.values(), default=float("inf"))
    calm = [lat for at, lat in viewers.latencies if start <= at < first]
    report = {"calm_p99_ms": p99(calm), "calm_events": len(calm)}
    for name, at in faults.items():
        window = [lat for t, lat in viewers.latencies if at <= t < at + FAULT_WINDOW]
        report[f"{name}_p99_ms"] = p99(window)
    faulty = [
        lat
        for t, lat in viewers.latencies
        if any(a <= t < a + FAULT_WINDOW for a in faults.values())
    ]
    report["faulty_p99_ms"] = p99(faulty)
    report["faulty_events"] = len(faulty)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--viewers", type=int, default=10, help="viewers per session")
    parser.add_argument("--minutes", type=float, default=10.0, help="the run's length")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4, help="turns per worker at once")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # a stopped run still cleans up
    OUT.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="load-run-", dir=OUT))
    run = Run(workdir, args.workers, args.concurrency)
    viewers = None
    try:
        run.pg.init()
        run.pg.psql("CREATE DATABASE inspect_load")
        os.environ.pop("REDIS_URL", None)  # the embedded one, in the run's directory
        os.environ.update(run.env())
        import django

        django.setup()
        from sessions import services

        run.start_redis()
        load_at_start = round(os.getloadavg()[0], 2)
        user, repository, cookie = setup(run, args.sessions)
        run.start_all()
        from bench.harness import wait_healthy

        wait_healthy(run.port)
        sessions = [
            services.session_create(
                repository=repository, creator=user, prompt="turn 0", agent_command=AGENT
            )
            for _ in range(args.sessions)
        ]
        viewers = Viewers(run.port, cookie, [s.pk for s in sessions], args.viewers)
        viewers.start()
        print(
            f"{args.sessions} sessions x {args.viewers} viewers for {args.minutes} min", flush=True
        )
        start = time.time()
        faults = drive(run, sessions, user, args.minutes * 60)
        last = settle(run, sessions, timeout=600)
        crashed = run.crashed()
        viewers.finish(last, timeout=120)
        result = check(sessions, viewers, last)
        report = {
            "setup": {**vars(args), "turn": f"{TURN_LINES} lines over 10 s",
                      "load_average_at_start": load_at_start,
                      "load_average_at_end": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()},
            **result,
            "processes_crashed": crashed,
            "latency": latency(viewers, start, faults),
        }  # fmt: skip
        report["targets"] = {
            "every_session_finishes": result["sessions_finished"] == args.sessions,
            "every_viewer_exactly_once_in_order": result["viewers_exact"] == result["viewers"],
            "no_pull_request_opened_twice": result["pull_requests_opened_twice"] == 0,
            "no_process_crashed": not crashed,
        }
        print_table(report)
        (OUT / "load.json").write_text(json.dumps(report, indent=2))
        print(json.dumps(report))
        return 0 if all(report["targets"].values()) else 1
    finally:
        if viewers is not None:
            viewers.stop, viewers.target = True, {}
        run.close()
        shutil.rmtree(workdir, ignore_errors=True)


def print_table(report: dict) -> None:
    lat, setup = report["latency"], report["setup"]
    after = [
        (f"  p99 after {key.removesuffix('_p99_ms').replace('_', ' ')}", f"{value} ms")
        for key, value in lat.items()
        if key.endswith("_p99_ms") and key not in {"calm_p99_ms", "faulty_p99_ms"}
    ]
    rows = [
        ("sessions finished", f"{report['sessions_finished']} / {setup['sessions']}"),
        ("viewers: every event once, in order", f"{report['viewers_exact']} / {report['viewers']}"),
        ("events / deliveries", f"{report['events']} / {report['deliveries']}"),
        ("pull requests (opened twice)",
         f"{report['pull_requests']} ({report['pull_requests_opened_twice']})"),
        ("p99 latency, calm (baseline)", f"{lat['calm_p99_ms']} ms"),
        ("p99 latency, faulty minutes", f"{lat['faulty_p99_ms']} ms"),
        *after,
        ("close codes seen by viewers", report["closes"]),
        *((f"CRASHED: {name}", line) for name, line in report["processes_crashed"].items()),
        *(("FAILED session", error[:200]) for error in report["failures"]),
        ("load average start / end",
         f"{setup['load_average_at_start']} / {setup['load_average_at_end']}"),
    ]  # fmt: skip
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    targets = report["targets"].items()
    print("targets: " + ", ".join(f"{k}={'met' if v else 'MISSED'}" for k, v in targets))


if __name__ == "__main__":
    sys.exit(main())
