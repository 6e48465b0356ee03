"""The drift sync of a freshly restored sandbox: what changed on the repository's branch since
its snapshot was built, brought into the workspace before the agent's first write."""

from __future__ import annotations

import threading
import time

from django.db import connection

from snapshots.restore import Restored, sync_drift


class DriftSync:
    """The drift sync, run inline or alongside the agent; `done` is set when it ends (either
    way), so waiting writes never hang on a failed sync. The thread only touches the sandbox
    and the mirror; the runner records the result on its own thread."""

    def __init__(self, restored: Restored, repository) -> None:
        self.restored, self.repository = restored, repository
        self.recorded = False
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.elapsed_ms = 0.0
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        started = time.perf_counter()
        try:
            sync_drift(self.restored, self.repository, fetch=True)
        except Exception as exc:
            self.error = exc
        finally:
            self.elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
            self.done.set()

    def start(self) -> DriftSync:
        def work() -> None:
            try:
                self.run()
            finally:
                connection.close()  # this thread's own connection

        self._thread = threading.Thread(target=work, daemon=True, name="drift-sync")
        self._thread.start()
        return self

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
