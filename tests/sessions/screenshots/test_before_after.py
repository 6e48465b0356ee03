"""A turn that changes a page gets before/after screenshots taken inside the sandbox."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions.models import Event
from sessions.screenshots import PNG_SIGNATURE, png_size
from tests.sessions.screenshots.conftest import REDDEN

pytestmark = pytest.mark.django_db


def shots(session_id):
    return [e.payload for e in Event.objects.filter(session_id=session_id, kind="screenshot")]


def image(client, payload) -> bytes:
    response = client.get(payload["url"])
    assert response.status_code == 200, payload["url"]
    assert response["Content-Type"] == "image/png"
    return b"".join(response.streaming_content)


def test_a_turn_that_changes_a_page_gets_before_and_after_pngs(web_repo, create_session, team):
    code, summary, err = create_session(
        "--prompt", "make it red", "--agent-command", REDDEN, "--inline", "--as", "engineer"
    )
    assert code == 0, err
    assert summary["state"] == "idle", summary
    errors = Event.objects.filter(session_id=summary["id"], kind="error")
    assert not errors.exists(), [e.payload for e in errors]
    payloads = shots(summary["id"])
    assert [(p["label"], p["path"]) for p in payloads] == [
        ("before", "/"), ("after", "/"), ("before", "/about.html"), ("after", "/about.html"),
    ]  # fmt: skip
    member = Client()
    member.force_login(team.reviewer)  # any member may look
    pngs = {(p["label"], p["path"]): image(member, p) for p in payloads}
    for p in payloads:
        data = pngs[(p["label"], p["path"])]
        assert data.startswith(PNG_SIGNATURE)
        assert png_size(data) == (640, 480) == (p["width"], p["height"])
        assert len(data) == p["bytes"]
    assert pngs[("before", "/")] != pngs[("after", "/")]  # the page changed
    assert pngs[("before", "/about.html")] == pngs[("after", "/about.html")]  # this one did not
    assert payloads[0]["changed"] == ["index.html"]


def test_a_non_member_cannot_fetch_a_screenshot(web_repo, create_session, team):
    _, summary, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    url = shots(summary["id"])[0]["url"]
    outsider = Client()
    outsider.force_login(team.outsider)
    assert outsider.get(url).status_code == 404
    assert Client().get(url).status_code == 302  # to the login page


def test_a_turn_that_touches_no_ui_file_takes_no_screenshots(web_repo, create_session):
    _, summary, _ = create_session(
        "--prompt", "docs", "--agent-command", "echo more >> README.md", "--inline"
    )
    assert summary["state"] == "idle", summary.get("error")
    assert shots(summary["id"]) == []


def test_the_before_images_are_taken_once_per_snapshot(web_repo, create_session, team):
    from django.core.files.storage import default_storage

    from sessions.models import Session
    from sessions.screenshots import cache_dir

    _, first, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    cache = cache_dir(Session.objects.get(pk=first["id"]).snapshot)
    cached = default_storage.listdir(cache)[1]
    assert len(cached) == 2  # one per path
    _, second, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    assert default_storage.listdir(cache)[1] == cached
    member = Client()
    member.force_login(team.engineer)
    images = [image(member, p) for p in shots(first["id"]) + shots(second["id"])]
    assert images[0] == images[4]  # the same "before" of /


def test_a_preview_that_does_not_start_is_reported_and_the_turn_still_ends(
    web_repo, create_session, inspect_cli
):
    web_repo.upstream.commit(
        {
            ".inspect/environment.toml": 'preview = { command = "echo broken; exit 3", '
            'url = "http://127.0.0.1:8000/", ready_seconds = 2 }\nui = ["*.html"]\n'
        }
    )
    inspect_cli("snapshot", "refresh", "widgets", "--json")
    _, summary, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    assert summary["state"] == "idle"
    error = Event.objects.get(session_id=summary["id"], kind="error").payload["message"]
    assert "screenshots were not taken" in error
    assert "did not answer at http://127.0.0.1:8000/ within 2 s" in error
    assert "broken" in error


def test_the_session_page_shows_the_pair_linked_to_full_size(web_repo, create_session, team):
    _, summary, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    member = Client()
    member.force_login(team.reviewer)
    page = member.get(f"/sessions/{summary['id']}/").content.decode()
    for p in shots(summary["id"]):
        assert f'<a href="{p["url"]}" target="_blank"' in page
        assert f'alt="{p["label"]} of {p["path"]}" width="640" height="480"' in page
    assert page.index("<strong>before</strong> <code>/</code>") < page.index(
        "<strong>after</strong> <code>/</code>"
    )
