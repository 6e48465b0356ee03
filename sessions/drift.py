"""The drift sync of a freshly restored sandbox: what changed on the repository's branch since
its snapshot was built, brought into the workspace before the agent's first write."""

from __future__ import annotations

import threading
import time

from django.db import connection

from snapshots import mirror
from snapshots.restore import Restored, sync_drift


class MirrorFetch:
    """The mirror's fetch for a first turn's drift sync, started as the turn starts, so it runs
    while the sandbox is claimed or restored instead of after."""

    def __init__(self, repository) -> None:
        self.repository = repository
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, daemon=True, name="mirror-fetch")

    def _work(self) -> None:
        try:
            mirror.update_mirror(self.repository.name, self.repository.url)
        except Exception as exc:
            self.error = exc
        finally:
            connection.close()  # this thread's own connection (fetch credentials)

    def start(self) -> MirrorFetch:
        self._thread.start()
        return self

    def wait(self) -> None:
        self._thread.join()
        if self.error is not None:
            raise self.error


class DriftSync:
    """The drift sync, run inline or alongside the agent; `done` is set when it ends (either
    way), so waiting writes never hang on a failed sync. The thread only touches the sandbox
    and the mirror; the runner records the result on its own thread."""

    def __init__(self, restored: Restored, repository, fetched: MirrorFetch | None = None) -> None:
        self.restored, self.repository = restored, repository
        self.fetched = fetched
        self.recorded = False
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.elapsed_ms = 0.0
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        started = time.perf_counter()
        try:
            if self.fetched is not None:
                self.fetched.wait()
            sync_drift(self.restored, self.repository, fetch=self.fetched is None)
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
