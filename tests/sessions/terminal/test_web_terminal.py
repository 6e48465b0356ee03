"""The web terminal: a shell inside the session's sandbox, typed into by engineers and watched
by every member, over a websocket."""

from __future__ import annotations

import asyncio

import pytest

from tests.sessions.stream.conftest import in_thread
from tests.sessions.terminal.conftest import TerminalClient

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_engineer_types_a_command_and_reads_its_output(
    terminal_daphne, live_session, cookies
):
    term = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["engineer"])
    hello = await term.until_message("hello")
    assert hello["can_type"] is True
    await term.type("echo $((6*7))-from-$(pwd)\r")
    await term.until_output(b"42-from-/workspace")
    await term.close()


async def test_every_member_sees_the_output_but_a_reviewer_cannot_type(
    terminal_daphne, live_session, cookies
):
    engineer = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["engineer"])
    await engineer.until_message("hello")
    reviewer = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["reviewer"])
    assert (await reviewer.until_message("hello"))["can_type"] is False
    await engineer.type("echo seen-by-$((1+1))-people\r")
    await reviewer.until_output(b"seen-by-2-people")
    await reviewer.type("touch /workspace/reviewer-was-here; echo typed-$((3*3))\r")
    refused = await reviewer.until_message("error")
    assert refused["code"] == 4403 and "engineer role" in refused["message"]
    await reviewer.send(type="resize", cols=33, rows=11)
    await engineer.type("ls /workspace; stty size\r")
    out = await engineer.until_output(b"24 80")
    assert b"typed-9" not in out and b"reviewer-was-here" not in out
    await engineer.close()
    await reviewer.close()


async def test_a_non_member_is_refused_with_4403(terminal_daphne, live_session, cookies):
    outsider = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["outsider"])
    error = await outsider.until_message("error")
    assert error["code"] == 4403 and "not a member" in error["message"]
    assert await outsider.close_code() == 4403


async def test_resize_changes_the_terminals_size(terminal_daphne, live_session, cookies):
    term = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["admin"])
    await term.until_message("hello")
    await term.send(type="resize", cols=132, rows=43)
    await asyncio.sleep(0.2)
    await term.type("stty size\r")
    output = await term.until_output(b"43 132")  # rows and columns, as the shell sees them
    assert b"43 132\r\n" in output.split(b"stty size", 1)[1]  # printed after the command
    await term.close()


async def test_typed_lines_are_audited_and_shown_in_the_session_log(
    terminal_daphne, live_session, cookies
):
    term = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["engineer"])
    await term.until_message("hello")
    await term.type("echo audited-line\r")
    await term.until_output(b"audited-line\r\n")
    await term.close()

    def audit():
        from approvals.models import AuditEntry
        from sessions.models import Event

        entries = AuditEntry.objects.filter(action="terminal.input", session_id=live_session.pk)
        events = Event.objects.filter(session_id=live_session.pk, kind="terminal")
        return (
            [(e.actor_name, e.data["input"]) for e in entries],
            [e.payload for e in events],
        )

    for _ in range(50):
        entries, events = await in_thread(audit)
        if entries and events:
            break
        await asyncio.sleep(0.1)
    assert ("engineer", "echo audited-line") in entries
    assert {"user": "engineer", "input": "echo audited-line"} in events


async def test_escape_sequences_in_output_reach_the_page_only_as_terminal_bytes(
    terminal_daphne, live_session, cookies
):
    """The server sends output as binary frames for xterm.js, never as markup."""
    term = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["engineer"])
    await term.until_message("hello")
    await term.type(
        "printf '\\033]0;<img src=x onerror=alert(1)>\\007<script>alert(2)</script>\\n'\r"
    )
    out = await term.until_output(b"<script>alert(2)</script>\r\n")
    assert b"\x1b]0;<img src=x onerror=alert(1)>\x07" in out
    assert all(m["type"] != "output" for m in term.messages)  # no text frame carries it
    await term.close()


def reap(session):
    from sessions.models import Session
    from snapshots.backends import sandbox_backend

    sandbox_backend().attach(session.sandbox_id).terminate()
    Session.objects.filter(pk=session.pk).update(sandbox_id="")


async def test_an_engineer_brings_a_reaped_sandbox_back_with_its_work(
    terminal_daphne, ready_repo, create_session, cookies
):
    def make():
        from sessions.models import Session

        _, summary, _ = create_session(
            "--prompt", "g", "--agent-command", "echo kept > kept.txt", "--inline"
        )
        session = Session.objects.get(pk=summary["id"])
        reap(session)
        return session

    session = await in_thread(make)
    viewer = await TerminalClient.open(terminal_daphne, session.pk, cookies["reviewer"])
    error = await viewer.until_message("error")
    assert error["code"] == 4404 and "an engineer opening the terminal" in error["message"]
    term = await TerminalClient.open(terminal_daphne, session.pk, cookies["engineer"])
    await term.until_message("hello", timeout=60)
    await term.type("cat kept.txt\r")
    await term.until_output(b"kept\r\n")
    await term.close()
