"""The record of every call and attribute read the Modal adapter makes on the fake ``modal``
(``fake_modal.py``), each checked against the installed SDK as it happens (``sdk_contract``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tests.snapshots.sandbox.modal.sdk_contract import check_attribute, check_call


@dataclass
class Call:
    target: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.attributes: set[str] = set()
        self._lock = threading.Lock()

    def call(self, target: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Check and record a call; return its arguments by name, defaults applied."""
        bound = check_call(target, args, kwargs)
        with self._lock:
            self.calls.append(Call(target, args, kwargs))
        return dict(bound.arguments)

    def attribute(self, target: str) -> None:
        check_attribute(target)
        with self._lock:
            self.attributes.add(target)

    def named(self, target: str) -> list[Call]:
        return [c for c in self.calls if c.target == target]

    def last(self, target: str) -> Call:
        found = self.named(target)
        assert found, f"no {target} call recorded; calls: {[c.target for c in self.calls]}"
        return found[-1]
