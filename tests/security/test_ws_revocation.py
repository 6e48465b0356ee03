"""Live connections follow membership: a member removed from a repository (or demoted, or
deactivated) stops receiving its sessions' events and stops typing in their terminals, at once
when the change is signalled, and within the re-check heartbeat when the signal is lost.

The attack: connect while a member, get removed, keep the socket open and keep reading (and
typing). Real daphne processes, real sockets, a real sandbox for the terminal.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import websockets

from tests.sessions.stream.conftest import append, in_thread, running_daphne
from tests.sessions.stream.viewer import Viewer
from tests.sessions.terminal.conftest import TerminalClient

pytestmark = pytest.mark.django_db(transaction=True)

QUICK_RECHECK = 1  # seconds, for the daphne that shows the heartbeat path


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker, tmp_path_factory):
    """The default heartbeat (30 s): anything faster than that is the signal path."""
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with running_daphne(log, INSPECT_TERMINAL_IDLE_SECONDS="60") as server:
        yield server


@pytest.fixture(scope="module")
def quick_daphne(django_db_setup, django_db_blocker, tmp_path_factory):
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with running_daphne(
        log, INSPECT_TERMINAL_IDLE_SECONDS="60", INSPECT_WS_RECHECK_SECONDS=str(QUICK_RECHECK)
    ) as server:
        yield server


@pytest.fixture
def watched(transactional_db, team):
    from sessions.models import Session

    return Session.objects.create(
        repository=team.repository, creator=team.engineer, title="watched", branch="b"
    )


def remove_member(user) -> None:
    """Remove `user` from every repository the way the admin and the CLI do: signals fire."""
    from accounts.models import Membership

    for membership in Membership.objects.filter(user=user):
        membership.delete()


def remove_member_silently(user) -> None:
    """Remove `user`'s memberships with plain SQL: no signal, so no notification (as when the
    notification is lost: a Redis hiccup, another tool editing the database)."""
    from django.db import connection

    from accounts.models import Membership

    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {Membership._meta.db_table} WHERE user_id = %s", [user.pk])


def set_role(user, role: str, *, silently: bool = False) -> None:
    from accounts.models import Membership

    memberships = Membership.objects.filter(user=user)
    if silently:
        memberships.update(role=role)  # an update() sends no signal
        return
    for membership in memberships:
        membership.role = role
        membership.save()


async def closed_within(viewer: Viewer, seconds: float) -> tuple[int | None, float]:
    started = time.monotonic()
    code = await viewer.close_code(timeout=seconds)
    return code, time.monotonic() - started


# -- the session's event stream ------------------------------------------------------------------


async def test_a_removed_member_is_closed_within_a_second(daphne, watched, team, cookies):
    viewer = Viewer(daphne, watched.pk, cookies["reviewer"])
    await viewer.connect()
    assert (await viewer.next_of("hello"))["type"] == "hello"
    await in_thread(remove_member, team.reviewer)
    started = time.monotonic()
    error = await viewer.next_of("error", timeout=5)
    code = await viewer.close_code(timeout=5)
    assert time.monotonic() - started < 1.0
    assert code == 4403 and error["code"] == 4403


async def test_a_deactivated_user_is_closed_at_once(daphne, watched, team, cookies):
    viewer = Viewer(daphne, watched.pk, cookies["engineer"])
    await viewer.connect()
    await viewer.next_of("hello")

    def deactivate():
        team.engineer.is_active = False
        team.engineer.save()

    await in_thread(deactivate)
    code, took = await closed_within(viewer, 5)
    assert code == 4403 and took < 1.0


async def test_a_removal_without_a_signal_is_caught_by_the_heartbeat(
    quick_daphne, daphne, watched, team, cookies
):
    quick = Viewer(quick_daphne, watched.pk, cookies["manager"])
    await quick.connect()
    await quick.next_of("hello")
    await in_thread(remove_member_silently, team.manager)
    code, took = await closed_within(quick, QUICK_RECHECK * 5)
    assert code == 4403 and took <= QUICK_RECHECK * 3


async def test_a_member_who_stays_keeps_watching(quick_daphne, watched, team, cookies):
    viewer = Viewer(quick_daphne, watched.pk, cookies["reviewer"])
    await viewer.connect()
    await viewer.next_of("hello")
    await in_thread(remove_member, team.manager)  # someone else leaves
    await asyncio.sleep(QUICK_RECHECK * 2.5)  # a few heartbeats
    high = await in_thread(append, watched.pk, 2)
    await viewer.until(high, timeout=10)
    assert viewer.last == high and viewer.closes == []  # still open, still receiving
    await viewer.ws.close()


# -- the server-sent events stream ---------------------------------------------------------------


async def rest_of_stream(lines, seconds: float) -> list[str]:
    """The lines until the server ends the stream; fails if it is still open after `seconds`
    (keepalives would keep a client's read timeout from ever firing)."""

    async def read_all() -> list[str]:
        return [line async for line in lines]

    try:
        return await asyncio.wait_for(read_all(), seconds)
    except TimeoutError:
        pytest.fail(f"the stream was still open {seconds} s after the membership was removed")


async def test_a_removed_users_sse_stream_ends(daphne, watched, team, token_for):
    token = await in_thread(token_for, team.reviewer)
    url = f"{daphne.http_url}api/sessions/{watched.pk}/events/stream/"
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=20)) as client:
        async with client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            assert (await anext(lines)).startswith("retry:")
            await in_thread(remove_member, team.reviewer)
            rest = await rest_of_stream(lines, 3)
            assert not any(line.startswith("data:") for line in rest)
        again = await client.get(url, headers=headers)
        assert again.status_code == 404


async def test_a_silently_removed_users_sse_stream_ends_within_the_heartbeat(
    quick_daphne, watched, team, token_for
):
    token = await in_thread(token_for, team.reviewer)
    url = f"{quick_daphne.http_url}api/sessions/{watched.pk}/events/stream/"
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(10, read=20)) as client,
        client.stream("GET", url, headers={"Authorization": f"Bearer {token}"}) as response,
    ):
        lines = response.aiter_lines()
        assert (await anext(lines)).startswith("retry:")
        await in_thread(remove_member_silently, team.reviewer)
        await rest_of_stream(lines, QUICK_RECHECK * 5)


# -- the terminal --------------------------------------------------------------------------------


@pytest.fixture
def terminal_session(transactional_db, ready_repo, create_session):
    from sessions.models import Session

    _, summary, err = create_session(
        "--prompt", "x", "--agent-command", "true", "--inline", "--as", "engineer"
    )
    session = Session.objects.get(pk=summary["id"])
    assert session.sandbox_id, err
    return session


async def refused_input(term: TerminalClient, marker: str) -> dict:
    """Type a command that would print `marker` and create /workspace/<marker>.txt (the marker
    is typed split by quotes, so the shell's echo of the keystrokes does not contain it);
    returns the refusal, after checking that nothing ran."""
    half = len(marker) // 2
    await term.type(f"echo {marker[:half]}''{marker[half:]}; touch /workspace/{marker}.txt\r")
    refusal = await term.until_message("error", timeout=5)
    await term.quiet_for(1.0)
    assert marker.encode() not in term.output
    return refusal


async def test_a_demoted_typist_can_watch_but_no_longer_type(
    daphne, terminal_session, team, cookies
):
    term = await TerminalClient.open(daphne, terminal_session.pk, cookies["engineer"])
    assert (await term.until_message("hello"))["can_type"] is True
    await term.type("echo still-$((40+2))\r")
    await term.until_output(b"still-42")
    await in_thread(set_role, team.engineer, "reviewer")
    told = await term.until_message("role", timeout=1)
    assert told["can_type"] is False
    refusal = await refused_input(term, "demotedtyped")
    assert refusal["code"] == 4403 and "engineer role" in refusal["message"]
    # Still watching: an admin's command shows on the demoted member's screen.
    admin = await TerminalClient.open(daphne, terminal_session.pk, cookies["admin"])
    await admin.until_message("hello")
    await admin.type("ls /workspace; echo seen-$((6*6))\r")
    shown = await admin.until_output(b"seen-36")
    assert b"demotedtyped" not in shown  # the file was not made
    await term.until_output(b"seen-36")
    await admin.close()
    await term.close()


async def test_a_typist_demoted_without_a_signal_is_refused_at_the_next_input(
    daphne, terminal_session, team, cookies
):
    term = await TerminalClient.open(daphne, terminal_session.pk, cookies["engineer"])
    await term.until_message("hello")
    await term.type("echo ok-$((1+1))\r")
    await term.until_output(b"ok-2")
    await in_thread(lambda: set_role(team.engineer, "reviewer", silently=True))
    await asyncio.sleep(1.2)  # input re-checks the role when its last check is a second old
    refusal = await refused_input(term, "silentlydemoted")
    assert refusal["code"] == 4403
    await term.close()


async def test_a_removed_member_is_closed_out_of_the_terminal(
    daphne, terminal_session, team, cookies
):
    term = await TerminalClient.open(daphne, terminal_session.pk, cookies["engineer"])
    await term.until_message("hello")
    await in_thread(remove_member, team.engineer)
    started = time.monotonic()
    assert await term.close_code(timeout=5) == 4403
    assert time.monotonic() - started < 1.0


# -- the preview's websockets --------------------------------------------------------------------


async def test_a_removed_member_is_closed_out_of_the_preview_socket(ws_session, team, cookies):
    import tempfile
    from pathlib import Path

    with running_daphne(Path(tempfile.mkdtemp()) / "daphne.log") as server:
        async with websockets.connect(
            f"ws://127.0.0.1:{server.port}/sessions/{ws_session.pk}/preview/live",
            origin=f"http://127.0.0.1:{server.port}",
            additional_headers={"Cookie": cookies["reviewer"]},
            open_timeout=30,
        ) as ws:
            assert await asyncio.wait_for(ws.recv(), 10) == "path /live"
            await in_thread(remove_member, team.reviewer)
            started = time.monotonic()
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd.code == 4403
            assert time.monotonic() - started < 1.0


# -- the setting ---------------------------------------------------------------------------------


def test_the_recheck_cannot_be_set_longer_than_30_seconds(tmp_path):
    import subprocess
    import sys

    from django.conf import settings

    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env={
            "PATH": "/usr/bin:/bin",
            "INSPECT_DATA_DIR": str(tmp_path),
            "INSPECT_WS_RECHECK_SECONDS": "300",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "INSPECT_WS_RECHECK_SECONDS: 300 is above the maximum of 30" in result.stderr
