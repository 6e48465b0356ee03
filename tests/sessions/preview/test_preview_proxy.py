"""The live preview: members reach the application running inside the session's sandbox."""

from __future__ import annotations

import json

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_member_sees_the_page_served_inside_the_sandbox(live_session, team):
    response = client_of(team.reviewer).get(
        f"/sessions/{live_session.pk}/preview/some/page?q=1", HTTP_X_CUSTOM="yes"
    )
    assert response.status_code == 200
    echoed = json.loads(response.content)
    assert echoed["path"] == "/some/page?q=1"
    assert echoed["headers"]["X-Custom"] == "yes"
    assert echoed["headers"]["X-Forwarded-Prefix"] == f"/sessions/{live_session.pk}/preview"


def test_a_non_member_gets_404_and_a_visitor_the_login_page(live_session, team):
    url = f"/sessions/{live_session.pk}/preview/"
    assert client_of(team.outsider).get(url).status_code == 404
    assert Client().get(url).status_code == 302


def test_the_viewers_cookies_never_reach_the_sandbox_and_it_cannot_set_any(live_session, team):
    response = client_of(team.engineer).get(f"/sessions/{live_session.pk}/preview/")
    echoed = json.loads(response.content)
    assert "Cookie" not in echoed["headers"] and "cookie" not in echoed["headers"]
    assert "Set-Cookie" not in response.headers
    assert response.cookies.get("sessionid") is None
    # Its pages get an opaque origin: scripts there cannot act as the viewer on the dashboard.
    assert response["Content-Security-Policy"].startswith("sandbox ")
    assert "allow-same-origin" not in response["Content-Security-Policy"]


def test_redirects_stay_inside_the_preview_and_posts_go_through(live_session, team):
    client = client_of(team.engineer)
    base = f"/sessions/{live_session.pk}/preview"
    assert client.get(f"{base}/old")["Location"] == f"{base}/new"
    response = client.post(f"{base}/form", data=b"hello", content_type="text/plain")
    assert (response.status_code, response.content) == (201, b"HELLO")


def test_the_preview_is_started_when_it_is_not_running(live_session, team):
    from sessions.preview import session_preview
    from sessions.screenshots import stop_preview
    from snapshots.backends import sandbox_backend

    sandbox = sandbox_backend().attach(live_session.sandbox_id)
    stop_preview(sandbox, session_preview(live_session))
    response = client_of(team.engineer).get(f"/sessions/{live_session.pk}/preview/")
    assert response.status_code == 200
    from approvals.models import AuditEntry

    assert AuditEntry.objects.filter(action="preview.start", session_id=live_session.pk).exists()


def test_the_link_expires_with_the_sandbox(live_session, team):
    from snapshots.backends import sandbox_backend

    sandbox_backend().attach(live_session.sandbox_id).terminate()
    response = client_of(team.engineer).get(f"/sessions/{live_session.pk}/preview/")
    assert response.status_code == 404


def test_a_backend_without_a_door_into_its_sandboxes_says_so(live_session, team, monkeypatch):
    from snapshots.sandbox.base import Sandbox

    monkeypatch.setattr(
        "snapshots.sandbox.local_sandbox.LocalSandbox.connect_port",
        Sandbox.connect_port,
        raising=True,
    )
    response = client_of(team.engineer).get(f"/sessions/{live_session.pk}/preview/")
    assert response.status_code == 502
    assert "cannot connect to ports inside its sandboxes" in response.content.decode()
