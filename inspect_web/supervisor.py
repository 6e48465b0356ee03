"""`make run`: bring the whole system up on one machine and keep it up until Ctrl-C.

Preflight (settings, database, Redis, the ports), migrate, static files, the first admin, then
daphne + the model gateway + a Celery worker + Celery beat as children, while the pinned agent
CLIs are installed in the background (each step logged; a clear line when node or npm is
missing). The console shows a line per process, the URL, and warnings and errors; the rest of
each child's output is in the data dir's log/ (inspect_web.console). Ctrl-C (or SIGTERM)
stops every child, then the local sandboxes the workers left running (their processes and
overlay mounts: a sandbox is not a child of its worker, so it would outlive it); each session
resumes from its own snapshot on its next turn. The children also die with the supervisor if it
is killed outright (PR_SET_PDEATHSIG), so nothing is left orphaned. The embedded Redis is
started again if it dies (daphne and the workers reconnect); any other child stopping stops all.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import django
import redis
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from inspect_web.console import Relay, log_dir
from inspect_web.embedded_redis import EmbeddedRedisError, ensure_embedded_redis
from inspect_web.env import ConfigError, env_int, env_str, restrict_umask
from snapshots import agent_installs
from snapshots.backends import sandbox_backend

PR_SET_PDEATHSIG = 1


class StartupError(Exception):
    """One line for the person starting the system: what is wrong and what to do."""


def daphne_command(python: str, host: str, port: int) -> list[str]:
    """How the supervisor starts daphne: its access log goes to stdout (daphne's default),
    with credentials in addresses redacted (inspect_web.web_server)."""
    return [python, "-m", "inspect_web.web_server", "-b", host, "-p", str(port),
            "inspect_web.asgi:application"]  # fmt: skip


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _check_port_free(host: str, port: int, variable: str = "INSPECT_PORT") -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise StartupError(
                f"{variable}: port {port} on {host} is already in use ({exc.strerror}); "
                f"stop what is using it or set {variable} to another port"
            ) from None


def _check_database() -> None:
    try:
        connection.ensure_connection()
    except Exception as exc:  # driver errors vary; the message is what matters
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise StartupError(f"DATABASE_URL: cannot connect to the database: {first}") from None
    finally:
        connection.close()


def _check_redis(url: str) -> None:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3).ping()
    except (redis.RedisError, OSError) as exc:
        raise StartupError(f"REDIS_URL: cannot reach Redis at {url}: {exc}") from None


def _collect_static(settings) -> None:
    """collectstatic only when the static sources changed, so a second start takes seconds."""
    digest = hashlib.sha256()
    for root in [*settings.STATICFILES_DIRS, settings.BASE_DIR / "requirements.lock"]:
        for path in sorted(Path(root).rglob("*")) if Path(root).is_dir() else [Path(root)]:
            if path.is_file():
                digest.update(f"{path}:{path.stat().st_mtime_ns}".encode())
    stamp = Path(settings.STATIC_ROOT) / ".inspect-stamp"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        return
    call_command("collectstatic", interactive=False, verbosity=0)
    stamp.write_text(digest.hexdigest())


def install_agent_clis(echo=None) -> list[str]:
    """The platform's agent CLIs at their pinned versions (snapshots/agent_installs.py): what a
    missing one needs is installed, each is checked with the platform's node, and every step is
    said on stdout. Returns the problems (a session with that runtime fails until they are fixed;
    `manage.py inspect doctor` says the same)."""

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        return agent_installs.install_pinned(echo or say)
    except Exception as exc:  # never take the system down: the web UI and other runtimes work
        (echo or say)(f"agent CLIs: the start-up install failed: {exc}")
        return [str(exc)]


def _wait_healthy(
    url: str, children: dict[str, subprocess.Popen], timeout: float = 60, what: str = "web server"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, child in children.items():
            if child.poll() is not None:
                raise StartupError(f"{name} exited during start-up with status {child.returncode}")
        try:
            with urllib.request.urlopen(url + "healthz", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise StartupError(f"the {what} did not answer at {url} within {timeout:.0f} s")


def _stop(children: dict[str, subprocess.Popen], grace: float = 10.0) -> None:
    for child in children.values():
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def stop_local_sandboxes() -> list[str]:
    """Terminate every sandbox of this data dir's local backend, live or half-dead (processes
    killed, overlay and disk mounts undone, directories removed). Run after the workers have
    stopped, so no turn is starting one. Returns their ids."""
    if settings.SANDBOX_BACKEND != "local" or not (settings.SANDBOX_ROOT / "sandboxes").is_dir():
        return []
    backend = sandbox_backend()
    stopped = []
    for sandbox_id in backend.list_sandboxes():
        backend.attach(sandbox_id).terminate()
        stopped.append(sandbox_id)
    return stopped + backend.reap()


def run() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspect_web.settings")
    restrict_umask()  # the children (Redis, daphne, Celery) inherit it

    children: dict[str, subprocess.Popen] = {}
    stopping = False
    workers_started = False

    def request_stop(signum, frame):  # noqa: ARG001 - signal handler signature
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        host = env_str("INSPECT_HOST", "127.0.0.1")
        port = env_int("INSPECT_PORT", 8000, minimum=1, maximum=65535)
        workers = env_int("INSPECT_WORKER_CONCURRENCY", 2, minimum=1)
        turns = env_int("INSPECT_TURN_CONCURRENCY", 8, minimum=1)
        django.setup()
        _check_port_free(host, port)
        _check_port_free(settings.GATEWAY_HOST, settings.GATEWAY_PORT, "INSPECT_GATEWAY_PORT")
        child_options = {"start_new_session": True, "preexec_fn": _die_with_parent}
        if settings.EMBEDDED_REDIS:
            try:
                embedded = ensure_embedded_redis(
                    settings.EMBEDDED_REDIS_DIR, detach=False, **child_options
                )
            except EmbeddedRedisError as exc:
                raise StartupError(f"REDIS_URL (embedded): {exc}") from None
            if embedded.process is not None:
                children["redis"] = embedded.process
            print(f"Redis: embedded, {embedded.url}" + ("" if embedded.started else " (reused)"))
        else:
            _check_redis(settings.REDIS_URL)
        _check_database()
        call_command("migrate", interactive=False, verbosity=0)
        _collect_static(settings)
        call_command("ensure_admin")
        # In the background: the web UI is up at once; a session of a CLI runtime started before
        # its install ends installs it itself (sessions/runner.py) or says what is wrong.
        threading.Thread(target=install_agent_clis, name="agent-clis", daemon=True).start()

        python = sys.executable
        commands = {
            "daphne": daphne_command(python, host, port),
            # Its own process: model streams never share the web server's event loop.
            "gateway": [python, "-m", "gateway.server"],
            "worker": [python, "-m", "celery", "-A", "inspect_web", "worker", "-l", "info",
                       "-Q", "celery", "--concurrency", str(workers),
                       "-n", f"worker-{os.getpid()}@%h"],
            # Turns on their own queue, in threads (a turn mostly waits on its sandbox and the
            # model): picked up within milliseconds, never behind a build or a pool fill.
            "turns": [python, "-m", "celery", "-A", "inspect_web", "worker", "-l", "info",
                      "-Q", settings.TURN_QUEUE, "-P", "threads", "--concurrency", str(turns),
                      "--without-mingle", "--without-gossip", "-n", f"turns-{os.getpid()}@%h"],
            "beat": [python, "-m", "celery", "-A", "inspect_web", "beat", "-l", "info",
                     "--schedule", str(settings.DATA_DIR / "celerybeat-schedule")],
        }  # fmt: skip
        logs = log_dir(settings.DATA_DIR)
        workers_started = True
        for name, command in commands.items():
            children[name] = subprocess.Popen(
                command,
                cwd=settings.BASE_DIR,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                **child_options,
            )
            Relay(name, children[name].stdout, logs / f"{name}.log").start()
            print(f"{name + ':':<9}started (pid {children[name].pid}), log {logs / name}.log")
        gateway_host = settings.GATEWAY_HOST
        gateway_url = (
            f"http://{'[' + gateway_host + ']' if ':' in gateway_host else gateway_host}"
            f":{settings.GATEWAY_PORT}/"
        )
        _wait_healthy(gateway_url, children, what="model gateway")
        print(f"Model gateway: {gateway_url.rstrip('/')} and {settings.GATEWAY_SOCKET}", flush=True)
        url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
        _wait_healthy(url, children)
        print(
            f"Inspect Web is up at {url}  (Ctrl-C stops it). Warnings and errors show here; "
            f"everything else is in {logs}/",
            flush=True,
        )
        redis_restarts: list[float] = []
        while not stopping:
            for name, child in list(children.items()):
                if child.poll() is None:
                    continue
                if name == "redis":  # the workers and daphne reconnect; only Redis restarts
                    children.pop("redis")
                    restarted = _restart_embedded_redis(child.returncode, redis_restarts)
                    if restarted is not None:
                        children["redis"] = restarted
                    continue
                raise StartupError(f"{name} stopped unexpectedly with status {child.returncode}")
            time.sleep(0.5)
        print("Stopping…", flush=True)
        return 0
    except (ConfigError, StartupError) as exc:
        print(f"inspect-web: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        # The workers first (no fill starts any more), then the pools, then the embedded Redis
        # the pools are listed in.
        redis_child = children.pop("redis", None)
        _stop(children)
        if "worker" in children:
            _drain_pools()
        if workers_started:
            try:
                stopped = stop_local_sandboxes()
            except Exception as exc:  # still exit; the next start's beat reaps what is left
                print(f"inspect-web: could not stop the sandboxes: {exc}", file=sys.stderr)
            else:
                if stopped:
                    print(f"Stopped {len(stopped)} sandbox(es).", flush=True)
        if redis_child is not None:
            _stop({"redis": redis_child})


REDIS_RESTARTS_PER_MINUTE = 5


def _restart_embedded_redis(status: int | None, restarts: list[float]) -> subprocess.Popen | None:
    """Start the embedded Redis again after it died (its child, or None if another server now
    answers on its socket); a Redis that keeps dying stops the system instead."""
    now = time.monotonic()
    restarts[:] = [at for at in restarts if now - at < 60] + [now]
    if len(restarts) > REDIS_RESTARTS_PER_MINUTE:
        raise StartupError(
            f"redis stopped {len(restarts)} times within a minute (last status {status}); "
            f"see {settings.EMBEDDED_REDIS_DIR / 'redis.log'}"
        )
    print(f"redis:   stopped with status {status}; restarting it", flush=True)
    try:
        embedded = ensure_embedded_redis(
            settings.EMBEDDED_REDIS_DIR,
            detach=False,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    except EmbeddedRedisError as exc:
        raise StartupError(f"REDIS_URL (embedded): {exc}") from None
    print(f"redis:   restarted (pid {embedded.pid})", flush=True)
    return embedded.process


def _drain_pools() -> None:
    """Terminate the warm pools' idle sandboxes (and unmount them): none outlives Ctrl-C."""
    # why: it imports models, which need django.setup() (run() does it) before they load
    from sessions import warm_pool

    try:
        drained = warm_pool.drain_pools()
    except Exception as exc:  # Redis or the backend gone: say so, never hang the stop
        print(f"warm pools: could not terminate their sandboxes: {exc}", flush=True)
        return
    if drained:
        print(f"warm pools: terminated {drained} idle sandboxes", flush=True)


if __name__ == "__main__":
    sys.exit(run())
