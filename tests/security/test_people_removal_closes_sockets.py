"""Removing a member in Settings › People (or with `inspect member remove`) closes their open
websockets on the repository's sessions at once, and they cannot reconnect.

The attack: a member keeps a session's live stream open while an admin removes them, and keeps
reading. Real daphne, real sockets, the admin's removal posted to the real settings page.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest
from django.conf import settings

from tests.sessions.stream.conftest import append, in_thread, running_daphne
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker, tmp_path_factory):
    """The default heartbeat (30 s): a close within a second is the removal's own signal."""
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with running_daphne(log) as server:
        yield server


@pytest.fixture
def watched(transactional_db, team):
    from sessions.models import Session

    return Session.objects.create(
        repository=team.repository, creator=team.engineer, title="watched", branch="b"
    )


async def _post_as(daphne, cookie: str, path: str, data: dict) -> httpx.Response:
    """POST a settings form as the browser does: the page first, then its CSRF token."""
    base = daphne.http_url.rstrip("/")
    async with httpx.AsyncClient(base_url=base, headers={"Cookie": cookie}) as client:
        page = await client.get("/settings/repositories/widgets/people/")
        assert page.status_code == 200, page.status_code
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        csrf = page.cookies[settings.CSRF_COOKIE_NAME]
        return await client.post(
            path,
            data={**data, "csrfmiddlewaretoken": token},
            headers={
                "Cookie": f"{cookie}; {settings.CSRF_COOKIE_NAME}={csrf}",
                "Referer": f"{base}/settings/repositories/widgets/people/",
            },
        )


async def test_removed_on_the_settings_page_the_socket_closes_at_once(
    daphne, watched, team, cookies
):
    viewer = Viewer(daphne, watched.pk, cookies["reviewer"])
    await viewer.connect()
    await viewer.next_of("hello")
    started = time.monotonic()
    response = await _post_as(
        daphne,
        cookies["admin"],
        f"/settings/repositories/widgets/people/{team.reviewer.pk}/remove/",
        {},
    )
    assert response.status_code == 302
    error = await viewer.next_of("error", timeout=5)
    code = await viewer.close_code(timeout=5)
    assert code == 4403 and error["code"] == 4403
    assert time.monotonic() - started < 2.0
    # And the door stays shut.
    again = Viewer(daphne, watched.pk, cookies["reviewer"])
    await again.connect()
    assert (await again.next_of("error"))["code"] == 4403


async def test_an_engineer_cannot_remove_someone_and_their_socket_stays(
    daphne, watched, team, cookies
):
    viewer = Viewer(daphne, watched.pk, cookies["reviewer"])
    await viewer.connect()
    await viewer.next_of("hello")
    response = await _post_as_engineer(daphne, cookies["engineer"], team.reviewer.pk)
    assert response.status_code == 403
    high = await in_thread(append, watched.pk, 2)
    await viewer.until(high, timeout=10)
    assert viewer.closes == []
    await viewer.ws.close()


async def _post_as_engineer(daphne, cookie: str, user_id: int) -> httpx.Response:
    # The engineer has no settings page to take a token from: the CSRF cookie of any page.
    base = daphne.http_url.rstrip("/")
    async with httpx.AsyncClient(base_url=base, headers={"Cookie": cookie}) as client:
        page = await client.get("/sessions/new/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        csrf = page.cookies[settings.CSRF_COOKIE_NAME]
        return await client.post(
            f"/settings/repositories/widgets/people/{user_id}/remove/",
            data={"csrfmiddlewaretoken": token},
            headers={"Cookie": f"{cookie}; {settings.CSRF_COOKIE_NAME}={csrf}", "Referer": base},
        )


async def test_removed_with_the_cli_action_the_socket_closes_at_once(
    daphne, watched, team, cookies
):
    from snapshots.members import member_remove

    viewer = Viewer(daphne, watched.pk, cookies["manager"])
    await viewer.connect()
    await viewer.next_of("hello")
    started = time.monotonic()
    await in_thread(lambda: member_remove(team.repository, team.manager, by=team.admin))
    code = await viewer.close_code(timeout=5)
    assert code == 4403 and time.monotonic() - started < 1.0
