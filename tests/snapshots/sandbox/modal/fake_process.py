"""A command run in a fake Modal sandbox (``fake_modal.py``): its output streams, which tests
script (canned items, gates, errors), its stdin, and its exit (``returncode=-1`` plays Modal's
timed-out exec)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tests.snapshots.sandbox.modal.recorder import Recorder

_END = object()


class FakeStream:
    """An output stream. Items: ``str``/``bytes`` to yield, a ``threading.Event`` to wait for,
    an exception to raise. Canned streams end after their items; ``open=True`` ones on end()."""

    def __init__(self, recorder: Recorder, items: Iterable[Any] = (), *, open: bool = False):
        self._recorder = recorder
        self._queue: queue.Queue[Any] = queue.Queue()
        for item in items:
            self._queue.put(item)
        if not open:
            self._queue.put(_END)

    def feed(self, item: Any) -> None:
        self._queue.put(item)

    def end(self) -> None:
        self._queue.put(_END)

    def __iter__(self) -> Iterator[Any]:
        self._recorder.call("StreamReader.__iter__")
        while True:
            item = self._queue.get(timeout=10)
            if item is _END:
                self._queue.put(_END)  # a second reader sees the end too
                return
            if isinstance(item, threading.Event):
                assert item.wait(10), "test gate never opened"
                continue
            if isinstance(item, BaseException):
                raise item
            yield item


class FakeStdin:
    def __init__(self, process: FakeProcess) -> None:
        self._process = process
        self.written = bytearray()

    def write(self, *args: Any, **kwargs: Any) -> None:
        data = bytes(self._process.recorder.call("StreamWriter.write", *args, **kwargs)["data"])
        self.written += data
        if self._process.on_stdin:
            self._process.on_stdin(self._process, data)

    def drain(self, *args: Any, **kwargs: Any) -> None:
        self._process.recorder.call("StreamWriter.drain", *args, **kwargs)


class FakeProcess:
    """A process. ``returncode=-1`` plays Modal's timed-out exec; ``exit_gate`` delays exit."""

    def __init__(
        self,
        stdout: Iterable[Any] = (),
        stderr: Iterable[Any] = (),
        *,
        returncode: int = 0,
        exit_gate: threading.Event | None = None,
        open_streams: bool = False,
        on_stdin: Callable[[FakeProcess, bytes], None] | None = None,
    ) -> None:
        self._stdout_items, self._stderr_items = list(stdout), list(stderr)
        self._open = open_streams
        self.returncode = returncode
        self.exit_gate = exit_gate
        self.on_stdin = on_stdin
        self.killed = threading.Event()
        self.recorder: Recorder
        self.argv: tuple[str, ...] = ()
        self.kwargs: dict = {}

    def start(self, recorder: Recorder, argv: tuple[str, ...], kwargs: dict) -> FakeProcess:
        self.recorder, self.argv, self.kwargs = recorder, argv, kwargs
        self._stdout = FakeStream(recorder, self._stdout_items, open=self._open)
        self._stderr = FakeStream(recorder, self._stderr_items, open=self._open)
        self._stdin = FakeStdin(self)
        return self

    @property
    def stdout(self) -> FakeStream:
        self.recorder.attribute("ContainerProcess.stdout")
        return self._stdout

    @property
    def stderr(self) -> FakeStream:
        self.recorder.attribute("ContainerProcess.stderr")
        return self._stderr

    @property
    def stdin(self) -> FakeStdin:
        self.recorder.attribute("ContainerProcess.stdin")
        return self._stdin

    def kill(self) -> None:
        self.killed.set()
        self._stdout.end()
        self._stderr.end()

    def _done(self) -> bool:
        return self.killed.is_set() or self.exit_gate is None or self.exit_gate.is_set()

    def wait(self, *args: Any, **kwargs: Any) -> int:
        self.recorder.call("ContainerProcess.wait", *args, **kwargs)
        while not self._done():
            self.killed.wait(0.01)
        return 137 if self.killed.is_set() else self.returncode
