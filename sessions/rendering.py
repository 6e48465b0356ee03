"""Server-side rendering of session events: the page and the live stream use the same HTML.

Agent output is text: every value goes through Django's autoescaping, never `|safe`, except the
diff's tables, which sessions.diff_render builds from escaped source.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from approvals.models import ApprovalRequest
from sessions import diff_render
from sessions.change_summary import change_summary
from sessions.event_kinds import KINDS, PULL_REQUEST_KINDS
from sessions.models import Event, PullRequest, Session

COLLAPSE_LINES = 400


def event_template(kind: str) -> str:
    """The template of an event's body: its kind's own, or the fallback for a kind this
    version does not know (a row written by a newer or older one)."""
    return f"sessions/events/{kind}.html" if kind in KINDS else "sessions/events/_unknown.html"


def render_event(event: Event) -> str:
    """The log's `<li>` item of one event."""
    if event.kind == "output":
        item = _output_item(event)
        if item is not None:
            return item
    context = {"event": event, "body": event_template(event.kind)}
    return render_to_string("sessions/_event.html", context)


def _output_item(event: Event) -> str | None:
    """An `output` event's item, byte for byte what `sessions/_event.html` with
    `sessions/events/output.html` renders (tests/sessions/test_rendering_fast_path.py), without
    the template engine: the commonest kind by far, and the live stream renders thousands a
    second. None for a payload not of the usual shape (a string `stream` and `text`, either
    missing): the template renders that."""
    payload = event.payload
    if type(payload) is not dict or type(event.seq) is not int:
        return None
    stream, text = payload.get("stream", ""), payload.get("text", "")
    if type(stream) is not str or type(text) is not str:
        return None
    seq, escape = event.seq, html.escape  # what django.utils.html.escape does to a str
    return SafeString(  # as mark_safe marks it (whose lazy-string check costs more than this)
        f'<li id="event-{seq}" data-seq="{seq}" class="event kind-output">\n'
        f'<span class="seq" aria-hidden="true">{seq}</span>\n'
        f'<code class="output stream-{escape(stream)}">{escape(text)}</code>\n\n</li>\n'
    )


def render_events(events: Iterable[Event]) -> str:
    """`<li>` items for the log, in the order given."""
    return "".join(render_event(e) for e in events)


def live_fragment(events: list[Event]) -> str:
    """What the websocket sends in HTML mode: new log items appended out of band, plus the
    panels that the events change (state badge, prompts, diff, verification, …)."""
    if not events:
        return ""
    return log_append(render_events(events)) + "".join(panel_updates(events).values())


def log_append(items: str) -> str:
    """Rendered log items (escaped by their templates), appended to the page's log out of
    band."""
    return _mark_safe(f'<div hx-swap-oob="beforeend:#log-events">{items}</div>')


def _mark_safe(text: str):
    return mark_safe(text)  # noqa: S308 - rendered by our own escaped templates


# Which side panels an event of a kind can change; the page and the stream share the partials.
# What happens to the session (its state, a turn's end, its pull request) may change any of these.
SESSION_PANELS = ("prompts", "timings", "children", "pull_request")
PANELS_BY_KIND: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("state", "stop_requested", "turn_finished", "workspace_synced", "publish_note"),
        SESSION_PANELS,
    ),
    **dict.fromkeys(PULL_REQUEST_KINDS, SESSION_PANELS),
    "prompt": ("prompts",),
    "diff": ("diff", "changes"),
    "command": ("verification",),
    "screenshot": ("shots",),
    "approval": ("approvals",),
    "tool_result": ("children",),
    "model_request": ("model_cost",),  # the gateway metered a request: the session's cost
}
PANELS = (
    "prompts", "pull_request", "timings", "verification", "approvals", "shots", "children", "diff",
    "changes", "model_cost",
)  # fmt: skip


def panel_context(session, names: Iterable[str] = PANELS) -> dict:
    """The template context for the named side panels of `session`'s page."""
    made: dict[str, list[dict]] = {}

    def diff() -> list[dict]:
        if "diff" not in made:
            made["diff"] = latest_diff(session)
        return made["diff"]

    builders = {
        "prompts": lambda: session.prompts.select_related("author"),
        "timings": lambda: None,
        "verification": lambda: latest_verification(session),
        "approvals": lambda: ApprovalRequest.objects.filter(
            session=session, state=ApprovalRequest.State.PENDING
        ),
        "shots": lambda: screenshots(session),
        "children": lambda: session.children.order_by("pk"),
        "pull_request": lambda: PullRequest.objects.filter(session=session).first(),
        "diff": diff,
        "changes": lambda: change_summary(diff()),
        "model_cost": lambda: None,  # the session's own cost_usd
    }
    return {name: builders[name]() for name in names}


def panels_changed_by(events: Iterable[Event]) -> list[str]:
    """The side panels that `events` change, in the order they first do."""
    names: list[str] = []
    for event in events:
        for name in PANELS_BY_KIND.get(event.kind, ()):
            if name not in names:
                names.append(name)
    return names


def panel_updates(events: list[Event], known: dict | None = None) -> dict[str, str]:
    """The out-of-band updates of what `events` change: the state badge (`"state"`, its
    newest state) and each changed panel by name. `known`: panel contexts the caller already
    has (kept up to date from the events, sessions.stream.html_tail); the rest are queried."""
    updates: dict[str, str] = {}
    for event in events:
        if event.kind == "state" and "to" in event.payload:
            state = event.payload["to"]  # only the newest state matters
            updates["state"] = render_to_string(
                "sessions/_state_badge.html", {"state": state, "oob": True}
            )
    names = panels_changed_by(events)
    if names:
        known = known or {}
        session = Session.objects.select_related("snapshot").get(pk=events[0].session_id)
        queried = panel_context(session, [n for n in names if n not in known])
        context = {"session": session, "oob": True, **queried, **known}
        for name in names:
            updates[name] = render_to_string(f"sessions/panels/{name}.html", context)
    return updates


def diff_file(payload: dict) -> dict:
    """One file of the diff panel: its diff event's payload, rendered for review
    (sessions.diff_render: both layouts, highlighted by the file's language)."""
    patch = payload.get("patch", "")
    path = str(payload.get("path", ""))
    binary = bool(payload.get("binary"))
    shown = patch
    if payload.get("patch_omitted"):  # the event log kept the head of a huge patch
        whole_lines = patch.rsplit("\n", 1)[0]  # the last line may be cut short
        shown = f"{whole_lines}\n{diff_render.TRUNCATED}\n"
    return {
        **payload,
        "lines": patch.count("\n"),
        "collapsed": patch.count("\n") > COLLAPSE_LINES,
        "key": diff_render.file_key(path, patch),
        "view": diff_render.render_patch(path, shown) if not binary else None,
    }


def _upto(events, upto: int | None):
    return events if upto is None else events.filter(seq__lte=upto)


def latest_diff(session, upto: int | None = None) -> list[dict]:
    """The diff panel's files: latest_diff_payloads, highlighted."""
    return [diff_file(payload) for payload in latest_diff_payloads(session, upto)]


def latest_diff_payloads(session, upto: int | None = None) -> list[dict]:
    """The newest per-file diff against the session's base: of the last turn, or of the hand
    edits recorded after it (same turn, their own commit). `upto`: as it stood at that seq."""
    diffs = _upto(Event.objects.filter(session=session, kind="diff"), upto)
    newest = diffs.order_by("-seq").values_list("payload__turn", "payload__commit").first()
    if newest is None:
        return []
    turn, commit = newest
    return [
        payload
        for payload in diffs.filter(payload__turn=turn)
        .order_by("seq")
        .values_list("payload", flat=True)
        if payload.get("commit") == commit
    ]


def latest_verification(session, upto: int | None = None) -> list[dict]:
    commands = _upto(
        Event.objects.filter(session=session, kind="command", payload__phase="verify"), upto
    )
    newest = commands.order_by("-seq").values_list("payload__turn", flat=True).first()
    if newest is None:
        return []
    return [e.payload for e in commands.filter(payload__turn=newest).order_by("seq")]


SHOTS = 20  # the newest screenshots the panel shows


def screenshots(session, upto: int | None = None) -> list[dict]:
    shots = _upto(Event.objects.filter(session=session, kind="screenshot"), upto)
    return [{**e.payload, "seq": e.seq} for e in shots.order_by("-seq")[:SHOTS]]
