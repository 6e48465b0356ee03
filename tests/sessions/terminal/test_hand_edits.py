"""What an engineer changes by hand in the terminal becomes part of the session's diff,
attributed to them, and of its snapshot."""

from __future__ import annotations

import pytest

from tests.sessions.stream.conftest import in_thread, running_daphne
from tests.sessions.terminal.conftest import TerminalClient

pytestmark = pytest.mark.django_db(transaction=True)


def hand_diff(session_id):
    from sessions.models import Event, Session

    session = Session.objects.get(pk=session_id)
    diffs = [
        e.payload
        for e in Event.objects.filter(session_id=session_id, kind="diff").order_by("seq")
        if e.payload.get("by_hand")
    ]
    return session, diffs


async def test_a_hand_edit_shows_in_the_diff_as_the_typists(terminal_daphne, live_session, cookies):
    term = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["engineer"])
    await term.until_message("hello")
    await term.type("sed -i 's/# widgets/# widgets, fixed by hand/' README.md && echo edited\r")
    await term.until_output(b"edited\r\n")
    await term.send(type="commit")
    recorded = await term.until_message("recorded")
    assert recorded["files"] == 1 and len(recorded["commit"]) == 40
    session, diffs = await in_thread(hand_diff, live_session.pk)
    assert [(d["path"], d["author"], d["by_hand"]) for d in diffs] == [
        ("README.md", "engineer", "engineer")
    ]
    assert "+# widgets, fixed by hand" in diffs[0]["patch"]
    assert session.diff_stats["paths"] == ["README.md"]
    assert session.session_snapshot_ref != live_session.session_snapshot_ref
    # The commit in the sandbox is the engineer's.
    await term.type("git -c safe.directory='*' log -1 --format='%an|%s'\r")
    await term.until_output(b"engineer|Edited by hand in the terminal by engineer")
    await term.close()


async def test_edits_are_recorded_when_the_terminal_closes(terminal_daphne, live_session, cookies):
    term = await TerminalClient.open(terminal_daphne, live_session.pk, cookies["engineer"])
    await term.until_message("hello")
    await term.type("echo new > notes.txt && echo done-writing\r")
    await term.until_output(b"done-writing\r\n")
    await term.close()
    import asyncio

    for _ in range(100):
        _, diffs = await in_thread(hand_diff, live_session.pk)
        if diffs:
            break
        await asyncio.sleep(0.1)
    assert [d["path"] for d in diffs] == ["notes.txt"]


async def test_an_idle_terminal_closes(live_session, cookies, tmp_path):
    with running_daphne(tmp_path / "idle.log", INSPECT_TERMINAL_IDLE_SECONDS="2") as daphne:
        term = await TerminalClient.open(daphne, live_session.pk, cookies["engineer"])
        await term.until_message("hello")
        assert await term.close_code(timeout=15) == 4408
        closed = [m for m in term.messages if m["type"] == "closed"]
        assert closed and "without input" in closed[0]["reason"]


@pytest.fixture
def turn_with_a_change(transactional_db, ready_repo, create_session):
    from sessions.models import Session

    _, summary, _ = create_session(
        "--prompt", "greet", "--agent-command", "printf 'hello\\n' > greeting.txt", "--inline"
    )
    return Session.objects.get(pk=summary["id"])


async def test_the_diff_panel_shows_the_turns_change_and_the_hand_edit_once_each(
    terminal_daphne, turn_with_a_change, cookies
):
    term = await TerminalClient.open(terminal_daphne, turn_with_a_change.pk, cookies["admin"])
    await term.until_message("hello")
    await term.type(
        "echo 'hello, by hand' > greeting.txt && echo >> README.md && echo ok-$((2+2))\r"
    )
    await term.until_output(b"ok-4")
    await term.send(type="commit")
    assert (await term.until_message("recorded"))["files"] == 2
    await term.close()

    def panel():
        from django.test import Client

        from sessions.rendering import latest_diff

        client = Client()
        client.force_login(turn_with_a_change.creator)
        page = client.get(f"/sessions/{turn_with_a_change.pk}/").content.decode()
        return [(f["path"], f["author"]) for f in latest_diff(turn_with_a_change)], page

    files, page = await in_thread(panel)
    assert files == [("README.md", "admin"), ("greeting.txt", "admin")]
    assert "by hand (admin)" in page
    assert "typed in the terminal:" in page


@pytest.fixture
def greeting_turn(transactional_db, ready_repo, create_session):
    from sessions.models import Session

    agent = 'printf "hello, %s\\n" "$INSPECT_PROMPT" > greeting.txt'
    _, summary, _ = create_session(
        "--prompt", "greet", "--agent-command", agent, "--inline", "--as", "engineer"
    )
    return Session.objects.get(pk=summary["id"])


async def test_only_the_files_edited_by_hand_are_attributed_to_the_typist(
    terminal_daphne, greeting_turn, cookies, inspect_cli
):
    term = await TerminalClient.open(terminal_daphne, greeting_turn.pk, cookies["admin"])
    await term.until_message("hello")
    await term.type("echo 'by hand' >> README.md && echo ok-$((3+3))\r")
    await term.until_output(b"ok-6")
    await term.send(type="commit")
    assert (await term.until_message("recorded"))["files"] == 2
    await term.close()

    def files():
        from sessions.rendering import latest_diff

        return [(f["path"], f["author"], f.get("by_hand")) for f in latest_diff(greeting_turn)]

    # The agent's greeting.txt stays the prompt author's; only README.md is the admin's.
    assert await in_thread(files) == [
        ("README.md", "admin", "admin"),
        ("greeting.txt", "engineer", None),
    ]

    # A follow-up turn rewrites greeting.txt: README.md is still marked as edited by hand.
    code, _, err = await in_thread(
        inspect_cli, "session", "prompt", str(greeting_turn.pk), "say bye", "--inline",
        "--as", "admin",
    )  # fmt: skip
    assert code == 0, err
    assert await in_thread(files) == [
        ("README.md", "admin", "admin"),
        ("greeting.txt", "admin", None),
    ]
