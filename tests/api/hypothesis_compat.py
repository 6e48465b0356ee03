"""hypothesis-jsonschema 0.23.1 (locked) drives `hypothesis...utils.many` through `more()`,
which hypothesis 6.170 (locked) replaced with a context manager + iterator. Without this
adapter schemathesis cannot generate any object (query, body) at all. Delete it once the lock
pairs versions that agree (an older hypothesis or a newer hypothesis-jsonschema)."""

from __future__ import annotations

from hypothesis.internal.conjecture import utils as cu


class _LegacyMany:
    """The old `more()`/`reject()` interface over the new `many`."""

    def __init__(self, *args, **kwargs) -> None:
        self._many = _new_many(*args, **kwargs)
        self._many.__enter__()
        self._elements = iter(self._many)
        self._open = True

    def more(self) -> bool:
        if not self._open:
            return False
        try:
            next(self._elements)
            return True
        except StopIteration:
            self._open = False
            self._many.__exit__(None, None, None)
            return False

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


_new_many = cu.many


def install() -> None:
    import hypothesis_jsonschema._from_schema as from_schema

    if not hasattr(_new_many, "more"):
        from_schema.cu = type("cu", (), {"many": _LegacyMany})
