"""A PostgreSQL server of the test's own, to stop and restart mid-test (the shared one must never
be restarted): initdb + pg_ctl from the installed server, run as the `postgres` user (initdb
refuses root), in a temporary directory, on a port of its own."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PORTS = range(8900, 9000)  # this suite's port range


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"no PostgreSQL server installed (/usr/lib/postgresql/*/bin/{name})")
    return found[-1]


def problem() -> str | None:
    """Why a private server cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (to run the server as the postgres user)"
    try:
        _bin("initdb")
    except RuntimeError as exc:
        return str(exc)
    return None


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


class PrivatePostgres:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="inspect-pg-"))
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self.port = _free_port()

    def _as_postgres(self, *argv: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            check=True,
            cwd=self.dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def init(self) -> PrivatePostgres:
        self._as_postgres(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                          "--no-sync", "-E", "UTF8")  # fmt: skip
        self.start()
        return self

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")  # fmt: skip
        log = str(self.dir / "server.log")
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), "-o", options,
                          "-l", log, "-w", "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """`fast`: every client connection is cut, as on a restart; `immediate`: a crash."""
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_seconds: float = 2.0) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def psql(self, sql: str, database: str = "postgres") -> None:
        subprocess.run([_bin("psql"), "-q", "-v", "ON_ERROR_STOP=1", self.url(database), "-c", sql],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip

    def copy_database(self, source_url: str, database: str) -> str:
        """A copy of the database at `source_url` (schema and rows) here; returns its URL."""
        self.psql(f"CREATE DATABASE {database}")
        dump = subprocess.run([_bin("pg_dump"), "--no-owner", "--no-privileges", source_url],
                              check=True, capture_output=True)  # fmt: skip
        subprocess.run([_bin("psql"), "-q", "-v", "ON_ERROR_STOP=1", self.url(database)],
                       input=dump.stdout, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        return self.url(database)

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # not running
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
