"""Text shown or stored where its size or its bytes cannot be trusted: the one way a long text is
cut to its head and tail, and the one way untrusted text is made safe to print on a terminal.

At the bottom of the layers (no Django, no app) because every layer shortens something: the
event log its payloads, the runner a command's output, the agent tools what the model reads, the
audit log its data; and both command-line clients print event text written by agents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Shown where text was left out; ``{omitted}`` is the number of characters.
OMITTED = "\n… [{omitted} characters omitted] …\n"


@dataclass(frozen=True)
class Cut:
    """A text kept as its first and last characters. ``omitted`` is 0 when the whole text fits
    (it is then all in ``head`` and ``tail`` is empty)."""

    head: str
    tail: str
    omitted: int

    def joined(self, marker: str = OMITTED) -> str:
        """Head, the marker (``{omitted}`` filled in) and tail; the text itself when whole."""
        if not self.omitted:
            return self.head + self.tail
        return self.head + marker.format(omitted=self.omitted) + self.tail


def cut(text: str, head: int, tail: int) -> Cut:
    """`text` kept to at most `head` + `tail` characters: its first `head` and last `tail`."""
    if len(text) <= head + tail:
        return Cut(text, "", 0)
    return Cut(text[:head], text[len(text) - tail :], len(text) - head - tail)


def shorten(text: str, limit: int, *, head: int | None = None, marker: str = OMITTED) -> str:
    """`text` cut to `limit` characters (half head, half tail unless `head` says), joined by
    `marker` saying how much was left out."""
    head = limit // 2 if head is None else head
    return cut(text, head, limit - head).joined(marker)


# Control characters untrusted text may carry (ANSI/OSC escapes that retitle the window, clear
# the screen, write the clipboard or hide text; carriage returns that overwrite a line): shown as
# caret notation (ESC is ^[), never passed to the terminal.
_CONTROLS = {c: f"^{chr(c + 64)}" for c in range(32) if chr(c) not in "\n\t"}
_CONTROLS.update({0x7F: "^?", **{c: f"\\x{c:02x}" for c in range(0x80, 0xA0)}})


def inert(value: Any) -> Any:
    """`value` (a string, or strings inside lists and dicts) with control characters made
    visible, so printing it cannot drive the reader's terminal. What both command-line clients
    print untrusted text (an agent's output, anything the server sent) through."""
    if isinstance(value, str):
        return value.translate(_CONTROLS)
    if isinstance(value, dict):
        return {k: inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [inert(v) for v in value]
    return value
