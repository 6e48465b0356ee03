"""`make run`'s console relay: everything to the process's log file, warnings, errors and whole
tracebacks also to the console."""

from __future__ import annotations

import io
import os

from inspect_web.console import Relay

OUTPUT = """\
[2026-12-05 12:00:00,000: INFO/MainProcess] Task sessions.tasks.watch_sessions[1] received
[12:00:00,010: INFO/ForkPoolWorker-1] Task sessions.tasks.watch_sessions[1] succeeded in 0.01s
[2026-12-05 12:00:01,000: WARNING/MainProcess] a snapshot build is late
127.0.0.1:5000 - - [05/Dec/2026:12:00:02] "GET /healthz" 200 2
Traceback (most recent call last):
  File "x.py", line 1, in <module>
    boom()
RuntimeError: boom
2026-12-05 12:00:03 ERROR sessions.runner: turn 4 failed
after the error
"""


def test_relay_writes_everything_and_echoes_what_matters(tmp_path):
    read_end, write_end = os.pipe()
    os.write(write_end, OUTPUT.encode())
    os.close(write_end)
    console = io.StringIO()
    relay = Relay("worker", os.fdopen(read_end, "rb"), tmp_path / "worker.log", out=console)
    relay.start().thread.join(timeout=10)
    assert (tmp_path / "worker.log").read_text() == OUTPUT
    assert console.getvalue().splitlines() == [
        "[worker] [2026-12-05 12:00:01,000: WARNING/MainProcess] a snapshot build is late",
        "[worker] Traceback (most recent call last):",
        '[worker]   File "x.py", line 1, in <module>',
        "[worker]     boom()",
        "[worker] RuntimeError: boom",
        "[worker] 2026-12-05 12:00:03 ERROR sessions.runner: turn 4 failed",
    ]
