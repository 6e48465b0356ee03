"""`make run`'s console: one short line per process, the URL, and the warnings and errors of
every process; everything each process prints goes whole to its own file under the data dir's
`log/` (the periodic tasks' chatter, daphne's access log, Celery's task lines).

Each child's stdout and stderr are one pipe read by a thread here: every line is appended to
`<data dir>/log/<process>.log`; a line at WARNING or above, and a traceback with its exception
line, is also printed as `[process] line`."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from typing import IO

# Celery's "[… WARNING/MainProcess]", Python logging's "WARNING name:", Django/daphne's own.
_LOUD = re.compile(r"\b(WARNING|ERROR|CRITICAL|FATAL)\b")
_TRACEBACK = "Traceback (most recent call last):"


def log_dir(data_dir: Path) -> Path:
    path = data_dir / "log"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


class Relay:
    """Copies one process's output to its log file, echoing what a person should see."""

    def __init__(self, name: str, stream: IO[bytes], log_path: Path, out: IO[str] | None = None):
        self.name = name
        self.stream = stream
        self.log_path = log_path
        self.out = out or sys.stdout
        self.echoed = 0
        self._in_traceback = False
        self.thread = threading.Thread(target=self._run, name=f"relay-{name}", daemon=True)

    def start(self) -> Relay:
        self.thread.start()
        return self

    def wants(self, line: str) -> bool:
        """Whether `line` reaches the console (tracebacks whole, up to their exception line)."""
        if self._in_traceback:
            if not line.startswith((" ", "\t")):
                self._in_traceback = False  # the exception's own line ends the traceback
            return True
        if line.startswith(_TRACEBACK):
            self._in_traceback = True
            return True
        return bool(_LOUD.search(line))

    def _run(self) -> None:
        with open(self.log_path, "ab", buffering=0) as log:
            for raw in iter(self.stream.readline, b""):
                log.write(raw)
                line = raw.decode(errors="replace").rstrip("\n")
                if self.wants(line):
                    self.echoed += 1
                    print(f"[{self.name}] {line}", file=self.out, flush=True)
