"""The session page's live frames (`?format=html`): rendered once per session in this process,
the same bytes for every viewer.

An HTML viewer used to render its own frames: every event's template, and for every frame the
side panels it touched, queried and rendered again (the diff re-highlighted), once per viewer.
HtmlTail is SessionTail's HTML twin: one viewer at a time reads the session's next events
(single flight) and renders each event's log item once, and the panels the batch changed once;
every viewer slices its frame out of it, and viewers at the same seq get the same cached frame.

What goes in is only what every member may see: the templates are rendered without a request,
so nothing viewer-specific (a CSRF token, a "you", a permission-dependent button) is baked in.
Forms in a panel carry no CSRF field; the page adds its own token as one is submitted
(static/js/session.js). Who may receive the frames is still checked per viewer by the consumer.

Panels that are a function of the log (diff, verification, screenshots) are kept up to date
from the events as they are read (LivePanels): a batch re-renders only the panels its events
changed, and each patch is highlighted once. The other panels (prompts, approvals, pull
request, …) live in other tables and are queried once per batch that changes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions import rendering
from sessions.change_summary import change_summary
from sessions.models import Event
from sessions.stream.read import PAGE_SIZE, Frame, events_page_many
from sessions.stream.tail import SessionTail

HTML_PAGE = 200  # events per HTML frame


@dataclass(frozen=True)
class _Batch:
    """The panel updates one read rendered, for the events first..last."""

    first: int
    last: int
    panels: dict[str, str]


class LivePanels:
    """The diff, verification and screenshot panels of one session, followed event by event.

    Each is loaded from the table (as it stood at that event) the first time an event changes
    it, then updated from each new event: a diff of the same turn and commit adds its file, a
    verify command of the same turn its result, a screenshot goes in front. A diff of another
    turn or commit (a new turn: once per turn) or a verify command of another turn loads again.
    Events must be given once each, in seq order (the tail reads the log as a gap-free prefix).
    """

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.diff: list[dict] | None = None
        self._diff_key: tuple[Any, Any] | None = None
        self.verification: list[dict] | None = None
        self._verify_turn: Any = None
        self.shots: list[dict] | None = None

    def follow(self, event: Event) -> None:
        payload = event.payload
        if event.kind == "diff":
            key = (payload.get("turn"), payload.get("commit"))
            if self.diff is None or key != self._diff_key:
                self.diff = rendering.latest_diff(self.session_id, upto=event.seq)
                self._diff_key = key
            else:
                self.diff.append(rendering.diff_file(payload))
        elif event.kind == "command" and payload.get("phase") == "verify":
            turn = payload.get("turn")
            if self.verification is None or turn != self._verify_turn:
                self.verification = rendering.latest_verification(self.session_id, upto=event.seq)
                self._verify_turn = turn
            else:
                self.verification.append(payload)
        elif event.kind == "screenshot":
            if self.shots is None:
                self.shots = rendering.screenshots(self.session_id, upto=event.seq)
            else:
                self.shots = [{**payload, "seq": event.seq}, *self.shots][: rendering.SHOTS]

    def known(self) -> dict[str, Any]:
        """The panel contexts this has followed so far (the rest must be queried)."""
        found = {"diff": self.diff, "verification": self.verification, "shots": self.shots}
        known = {name: value for name, value in found.items() if value is not None}
        if self.diff is not None:
            known["changes"] = change_summary(self.diff)
        return known


class HtmlTail(SessionTail):
    """The newest events of one session as the page's log items, and the panel updates of
    each read, rendered once for all its HTML viewers in this process. `renders` and
    `rendered_events` count the reads that rendered something and the events rendered."""

    frame_events = HTML_PAGE

    def __init__(self, session_id: int, base: int) -> None:
        super().__init__(session_id, base)
        self.batches: list[_Batch] = []
        self.live_panels = LivePanels(session_id)
        self.renders = 0
        self.rendered_events = 0

    @staticmethod
    def fetch(wanted: list[tuple[int, int]]) -> dict[int, list]:
        return events_page_many(wanted, PAGE_SIZE)

    def prepare(self, rows: list, after: int) -> tuple[list[str], dict[str, str], int]:
        """The log items of the events after `after` and the panel updates they make,
        rendered (in the database thread, one read of this tail at a time: LivePanels is only
        touched here)."""
        events = [e for i, e in enumerate(rows) if e.seq == after + 1 + i]  # gap-free prefix
        if not events:
            return [], {}, after
        for event in events:
            self.live_panels.follow(event)
        panels = rendering.panel_updates(events, self.live_panels.known())
        return [rendering.render_event(e) for e in events], panels, after

    def absorb(self, rendered: tuple[list[str], dict[str, str], int]) -> int:
        items, panels, after = rendered
        if not items:
            return 0
        self.renders += 1
        self.rendered_events += len(items)
        self.parts += items
        self.size += sum(len(item) for item in items)
        self.batches.append(_Batch(after + 1, after + len(items), panels))
        self._trim()
        return len(items)

    def _trim(self) -> None:
        first = self.first
        super()._trim()
        if self.first != first:
            self.batches = [b for b in self.batches if b.last >= self.first]

    def _frame(self, start: int, end: int, key: tuple[int, int]) -> Frame:
        """The log items of parts[start:end], then the newest update of each panel that the
        batches those events came in changed."""
        batches = []  # those the frame's events came in, newest first
        for batch in reversed(self.batches):
            if batch.last < key[0]:
                break
            if batch.first <= key[1]:
                batches.append(batch)
        panels: dict[str, str] = {}
        for batch in reversed(batches):
            panels.update(batch.panels)
        items = "".join(self.parts[start:end])
        return Frame(rendering.log_append(items) + "".join(panels.values()), *key)
