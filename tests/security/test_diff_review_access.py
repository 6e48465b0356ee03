"""The review diff's per-viewer requests follow repository membership, and one reviewer's
"viewed" marks reach no one else: not another member's page, not the live stream's frames
(rendered once for every viewer)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions import diff_render, rendering
from sessions.models import Event, ViewedFile

pytestmark = pytest.mark.django_db

SECRET_LINE = "twenty &lt;b&gt;"  # a line of the changed file, as the whole file shows it


def test_a_member_reads_the_whole_file_a_non_member_gets_404(client, team, reviewed_change):
    session = reviewed_change.session
    url = reverse("sessions:diff-file", args=[session.pk])
    client.force_login(team.engineer)
    member = client.get(url, {"path": "src/app.py"})
    assert member.status_code == 200 and SECRET_LINE in member.content.decode()

    client.force_login(team.outsider)  # an admin, but of another repository
    for path in ("src/app.py", "../../etc/passwd", "logo.png"):
        response = client.get(url, {"path": path})
        assert response.status_code == 404, path
        assert SECRET_LINE not in response.content.decode()
        assert "binary" not in response.content.decode()  # nothing says what the file is


def test_a_non_member_cannot_mark_viewed(client, team, reviewed_change):
    session = reviewed_change.session
    key = diff_render.file_key("src/app.py", reviewed_change.diff("src/app.py")["patch"])
    client.force_login(team.outsider)
    url = reverse("sessions:diff-viewed", args=[session.pk])
    assert client.post(url, {"path": "src/app.py", "key": key}).status_code == 404
    assert not ViewedFile.objects.exists()


def test_viewed_marks_stay_out_of_the_shared_panel_and_other_pages(client, team, reviewed_change):
    session = reviewed_change.session
    key = diff_render.file_key("src/app.py", reviewed_change.diff("src/app.py")["patch"])
    client.force_login(team.reviewer)
    url = reverse("sessions:diff-viewed", args=[session.pk])
    assert client.post(url, {"path": "src/app.py", "key": key}).status_code == 200

    # What the live stream sends every viewer for these events: no one's marks in it.
    events = list(Event.objects.filter(session=session, kind="diff").order_by("seq"))
    frame = rendering.panel_updates(events)["diff"]
    assert 'class="viewed-box"' in frame  # the checkbox, unchecked: the browser checks it
    assert "checked" not in frame and 'class="file viewed"' not in frame
    client.force_login(team.engineer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert key not in page.split('id="diff-viewed"', 1)[1]
