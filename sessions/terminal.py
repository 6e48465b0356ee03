"""The web terminal: a shell on a PTY inside the session's live sandbox, shared by everyone
watching (`ws/sessions/<id>/terminal/`).

Every member of the session's repository who connects sees the same terminal (one shell per
session per web process, with the last SCROLLBACK bytes replayed to a late joiner); only members
whose role may prompt the session (engineers and admins) can type or resize it. Each line typed
is audited (`terminal.input`) and shown in the session log (a `terminal` event). The terminal
closes after TERMINAL_IDLE_SECONDS without input, when its last viewer leaves, or when the shell
exits. When it closes, or when a typist asks (`commit`), files changed by hand are committed in
the sandbox as the person who typed, and the session's diff, with its snapshot, follows them.

Its websocket, wire format and close codes are sessions.stream.terminal_socket's; a viewer here
is one such connection (`push` output to it, `end` it).

A note on several web processes: the shell lives in the process its first viewer reached;
viewers served by another daphne process get a shell of their own in the same sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Protocol

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from approvals.audit import record
from sessions.events import append_events, diff_attribution
from sessions.lease import DriverLease
from sessions.models import Session
from sessions.pulls import publish_changes
from sessions.turn_changes import commit_author, diff_events, diff_stats
from sessions.workspace_git import commit_turn, diff_against, paths_changed_by
from snapshots.backends import sandbox_backend
from snapshots.restore import NoSnapshot, restore_sandbox
from snapshots.sandbox import Limits, Pty, Sandbox, SandboxError, SandboxGone

log = logging.getLogger(__name__)

IDLE = 4408  # the close code of a terminal closed for idleness
SCROLLBACK = 64 * 1024
TOUCH_SECONDS = 30.0  # how often typing marks the session active (the idle reaper reads it)
SHELL = ("/bin/bash", "-i")


class Viewer(Protocol):
    """A connection watching a terminal (sessions.stream.terminal_socket)."""

    def push(self, chunk: bytes) -> None: ...

    async def end(self, reason: str, code: int) -> None: ...


def idle_seconds() -> float:
    return float(getattr(settings, "TERMINAL_IDLE_SECONDS", 600))


# -- hand edits ---------------------------------------------------------------------------------


def record_hand_edits(session_id: int, typists: list) -> dict:
    """Commit what was changed by hand in the session's sandbox, as the people who typed, and
    append the session's new diff (attributed to them) and snapshot, and publish it to the
    session's pull request. Returns {"files", "commit"}
    ({} when nothing changed). Raises SandboxError; a running turn takes precedence (its own
    commit then carries the edits) and this returns {"busy": True}."""
    lease = DriverLease(session_id)
    if not lease.acquire():
        return {"busy": True}
    try:
        session = Session.objects.select_related("repository").get(pk=session_id)
        sandbox = _attach(session)
        first, others = commit_author(typists[0]), [commit_author(u) for u in typists[1:]]
        names = ", ".join(u.get_username() for u in typists)
        commit = commit_turn(
            sandbox,
            author=first,
            message=f"Edited by hand in the terminal by {names}",
            co_authors=[f"{a.name} <{a.email}>" for a in others],
        )
        if commit is None:
            return {}
        files = diff_against(sandbox, session.base_commit)
        by_hand = paths_changed_by(sandbox, commit)
        earlier = diff_attribution(session_id)
        turn = session.prompts.order_by("-order").values_list("order", flat=True).first() or 0
        typist = {"author": typists[0].get_username()}
        # Only what was typed is the typists'; the rest keeps its author.
        append_events(
            session_id,
            diff_events(
                files, turn, commit,
                lambda path: {**typist, "by_hand": names} if path in by_hand
                else earlier.get(path, typist),
            ),
        )  # fmt: skip
        ref = sandbox.snapshot()
        Session.objects.filter(pk=session_id).update(
            session_snapshot_ref=str(ref),
            diff_stats=diff_stats(files),
            updated_at=timezone.now(),
        )
        # The hand edits go to the pull request too, so a merge never leaves them behind.
        publish_changes(session, sandbox, fence=lease.fence, verified=False)
        return {"files": len(files), "commit": commit}
    finally:
        lease.release()


def _attach(session: Session) -> Sandbox:
    if not session.sandbox_id:
        raise SandboxGone("-", "the session has no running sandbox")
    return sandbox_backend(session.sandbox_backend or None).attach(session.sandbox_id)


# -- the shared terminal ------------------------------------------------------------------------


class SharedTerminal:
    """One shell in a session's sandbox and the consumers watching it (in this process)."""

    def __init__(self, session_id: int, pty: Pty, cols: int, rows: int) -> None:
        self.session_id = session_id
        self.pty = pty
        self.cols, self.rows = cols, rows
        self.viewers: set[Viewer] = set()
        self.scrollback = bytearray()
        self.last_input = time.monotonic()
        self.last_touch = 0.0
        self.typists: dict[int, object] = {}  # user id -> user, in the order they typed
        self.lines: dict[int, str] = {}  # per typist: what they typed since their last Enter
        self.closed = False
        self.loop = asyncio.get_running_loop()
        self._reader = threading.Thread(target=self._read, daemon=True, name="terminal-read")
        self._reader.start()
        self._watchdog = asyncio.ensure_future(self._watch_idle())

    # The reader thread: the PTY's blocking reads, handed to the event loop.
    def _read(self) -> None:
        while not self.closed:
            try:
                chunk = self.pty.read(timeout=0.5)
            except Exception:  # the sandbox went away under us
                chunk = b""
                self.loop.call_soon_threadsafe(self._ended)
                return
            if chunk:
                self.loop.call_soon_threadsafe(self._output, chunk)
            elif self.pty.exit_code() is not None:
                self.loop.call_soon_threadsafe(self._ended)
                return

    def _output(self, chunk: bytes) -> None:
        self.scrollback += chunk
        del self.scrollback[:-SCROLLBACK]
        for viewer in list(self.viewers):
            viewer.push(chunk)

    def _ended(self) -> None:
        if not self.closed:
            asyncio.ensure_future(self.close("the shell exited", code=1000))

    async def _watch_idle(self) -> None:
        limit = idle_seconds()
        while not self.closed:
            await asyncio.sleep(min(5.0, max(0.2, limit / 4)))
            if time.monotonic() - self.last_input > limit:
                await self.close(f"closed after {int(limit)} s without input", code=IDLE)
                return

    async def type(self, user, data: str) -> None:
        self.last_input = time.monotonic()
        self.typists.setdefault(user.pk, user)
        await asyncio.get_running_loop().run_in_executor(None, self.pty.write, data.encode())
        # Audit whole lines: what was typed up to each Enter, per person.
        line = self.lines.get(user.pk, "") + data
        *done, rest = line.replace("\n", "\r").split("\r")
        self.lines[user.pk] = rest[-4000:]
        if done or time.monotonic() - self.last_touch > TOUCH_SECONDS:
            self.last_touch = time.monotonic()
            await database_sync_to_async(_record_input)(self.session_id, user, done)

    async def resize(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        await asyncio.get_running_loop().run_in_executor(None, self.pty.resize, cols, rows)

    async def record_edits(self) -> dict:
        typists = list(self.typists.values())
        if not typists:
            return {}
        return await database_sync_to_async(record_hand_edits)(self.session_id, typists)

    async def close(self, reason: str, *, code: int = 1000) -> None:
        if self.closed:
            return
        self.closed = True
        if _terminals.get(self.session_id) is self:
            del _terminals[self.session_id]
        if asyncio.current_task() is not self._watchdog:  # it may be the one closing
            self._watchdog.cancel()
        for user_id, rest in self.lines.items():
            if rest:
                await database_sync_to_async(_record_input)(
                    self.session_id, self.typists[user_id], [rest], partial=True
                )
        await asyncio.get_running_loop().run_in_executor(None, self.pty.close)
        for viewer in list(self.viewers):
            await viewer.end(reason, code)
        try:
            await self.record_edits()
        except Exception:
            log.exception("recording hand edits of session %s failed", self.session_id)


_terminals: dict[int, SharedTerminal] = {}
_opening: dict[int, asyncio.Lock] = {}


def _record_input(session_id: int, user, lines: list[str], *, partial: bool = False) -> None:
    """Audit typed lines and show them in the session log; also marks the session active."""
    Session.objects.filter(pk=session_id).update(updated_at=timezone.now())
    if not lines:
        return
    session = Session.objects.select_related("repository").get(pk=session_id)
    for line in lines:
        record(
            "terminal.input",
            actor=user,
            session=session,
            object_type="session",
            object_id=session_id,
            data={"input": line, "partial": partial},
        )
    append_events(
        session_id,
        [("terminal", {"user": user.get_username(), "input": line[:2000]}) for line in lines],
    )


def wake_sandbox(session_id: int, user) -> Sandbox:
    """Restore a session's reaped sandbox from its own snapshot (as its next turn would), so
    that someone can work in it by hand. Raises SandboxError saying why it cannot."""
    lease = DriverLease(session_id)
    if not lease.acquire():
        raise SandboxError("a turn is starting in this session; open the terminal again shortly")
    try:
        session = Session.objects.select_related("repository", "snapshot").get(pk=session_id)
        with contextlib.suppress(SandboxGone):
            return _attach(session)
        if session.snapshot is None:
            raise SandboxError("the session has not run a turn yet; queue a prompt first")
        try:
            restored = restore_sandbox(
                session.repository,
                snapshot=session.snapshot,
                snapshot_ref=session.session_snapshot_ref or None,
                limits=Limits(wall_seconds=settings.SNAPSHOT_SETUP_TIMEOUT),
            )
        except NoSnapshot as exc:
            raise SandboxError(str(exc)) from None
        Session.objects.filter(pk=session_id).update(
            sandbox_id=restored.sandbox.id,
            sandbox_backend=sandbox_backend().name,
            updated_at=timezone.now(),
        )
        record(
            "sandbox.restore",
            actor=user,
            session=session,
            object_type="session",
            object_id=session_id,
            data={"sandbox": restored.sandbox.id, "for": "terminal"},
        )
        return restored.sandbox
    finally:
        lease.release()


def _open_pty(session_id: int, user, may_type: bool, cols: int, rows: int) -> Pty:
    session = Session.objects.get(pk=session_id)
    if may_type and session.purpose == Session.Purpose.REVIEW:
        raise SandboxError(
            "a review session is read-only: its terminal can be watched, not typed in; "
            "start a session of your own to change the code"
        )
    try:
        sandbox = _attach(session)
    except SandboxGone:
        if not may_type:  # watching does not bring a sandbox back; working in it does
            raise
        sandbox = wake_sandbox(session_id, user)
    return sandbox.open_pty(
        SHELL, cols=cols, rows=rows, cwd="/workspace", env={"TERM": "xterm-256color"}
    )


async def shared_terminal(
    session_id: int, user, may_type: bool, cols: int = 80, rows: int = 24
) -> SharedTerminal:
    """The session's terminal in this process, opened on first use (restoring a reaped sandbox
    when the user may type)."""
    lock = _opening.setdefault(session_id, asyncio.Lock())
    async with lock:
        terminal = _terminals.get(session_id)
        if terminal is None or terminal.closed:
            pty = await database_sync_to_async(_open_pty)(session_id, user, may_type, cols, rows)
            terminal = SharedTerminal(session_id, pty, cols, rows)
            _terminals[session_id] = terminal
        return terminal
