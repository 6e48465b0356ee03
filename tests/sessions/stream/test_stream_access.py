"""Only members of a session's repository can watch it; nobody can tell a session they may not
see from one that does not exist."""

import pytest

from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


async def refused(daphne, session_id, cookie) -> tuple[dict, int]:
    viewer = Viewer(daphne, session_id, cookie)
    await viewer.connect()
    error = await viewer.next_of("error")
    return error, await viewer.close_code()


async def test_every_member_role_can_watch(daphne, watched_session, cookies):
    for role in ["engineer", "reviewer", "manager", "admin"]:
        viewer = Viewer(daphne, watched_session.pk, cookies[role])
        await viewer.connect()
        assert (await viewer.recv())["type"] == "hello", role
        await viewer.close()


async def test_a_non_member_is_closed_with_4403(daphne, watched_session, cookies):
    error, code = await refused(daphne, watched_session.pk, cookies["outsider"])
    assert code == 4403
    assert error["code"] == 4403
    assert "not a member" in error["message"]


async def test_an_unknown_session_looks_the_same_as_a_forbidden_one(
    daphne, watched_session, cookies
):
    forbidden = await refused(daphne, watched_session.pk, cookies["outsider"])
    unknown = await refused(daphne, watched_session.pk + 1000, cookies["outsider"])
    missing_for_member = await refused(daphne, watched_session.pk + 1000, cookies["engineer"])
    assert forbidden == unknown == missing_for_member


async def test_an_anonymous_visitor_is_closed_with_4401(daphne, watched_session):
    error, code = await refused(daphne, watched_session.pk, None)
    assert code == 4401
    assert error == {"type": "error", "code": 4401, "message": "Log in to watch this session."}


async def test_a_forged_session_cookie_counts_as_anonymous(daphne, watched_session):
    _, code = await refused(daphne, watched_session.pk, "sessionid=not-a-real-session")
    assert code == 4401


async def test_a_non_member_learns_nothing_about_the_events(daphne, watched_session, cookies):
    from tests.sessions.stream.conftest import append

    append(watched_session.pk, 5)
    viewer = Viewer(daphne, watched_session.pk, cookies["outsider"])
    await viewer.connect()
    await viewer.close_code()
    assert viewer.seqs == []
    assert [m["type"] for m in viewer.messages] == ["error"]
