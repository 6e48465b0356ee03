"""Reviewing a session's diff: a file read whole for context (and every way that can be refused,
with a message), and each reviewer's own "viewed" marks."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from sessions import diff_render
from sessions.models import ViewedFile
from snapshots import mirror

pytestmark = pytest.mark.django_db


def whole(client, session, path: str, **extra: str):
    return client.get(reverse("sessions:diff-file", args=[session.pk]), {"path": path, **extra})


def mark(client, session, path: str, key: str, viewed: str = "1"):
    url = reverse("sessions:diff-viewed", args=[session.pk])
    return client.post(url, {"path": path, "key": key, "viewed": viewed})


def test_the_whole_file_comes_from_the_published_commit_with_the_changes_marked(
    client, team, reviewed_change
):
    client.force_login(team.reviewer)
    response = whole(client, reviewed_change.session, "src/app.py")
    assert response.status_code == 200
    html = response.content.decode()
    lines = reviewed_change.upstream.git("show", f"{reviewed_change.head}:src/app.py").count("\n")
    assert re.findall(r'data-new="(\d+)"', html.split('class="diff-table split')[0])[-1] == str(
        lines
    )  # every line of the file, to its last
    assert 'class="del" data-old="82"' in html  # "return 20", removed where it was
    assert '"twenty &lt;b&gt;"' in html and "<b>" not in html
    assert reviewed_change.head[:12] in html


def test_a_path_outside_the_repository_is_refused(client, team, reviewed_change):
    client.force_login(team.reviewer)
    for path in ("../../etc/passwd", "/etc/passwd", "src/../../x", ""):
        response = whole(client, reviewed_change.session, path)
        assert response.status_code == 400, path
        assert "repository" in response.content.decode()


def test_a_file_not_in_the_diff_is_refused(client, team, reviewed_change):
    client.force_login(team.reviewer)
    response = whole(client, reviewed_change.session, "README.md")
    assert response.status_code == 404
    assert "README.md is not in this session&#x27;s diff" in response.content.decode()


def test_a_binary_file_says_so(client, team, reviewed_change):
    client.force_login(team.reviewer)
    response = whole(client, reviewed_change.session, "logo.png")
    assert response.status_code == 422
    assert "logo.png is a binary file" in response.content.decode()


def test_a_huge_file_is_capped_with_a_note(client, team, reviewed_change, monkeypatch):
    client.force_login(team.reviewer)
    response = whole(client, reviewed_change.session, "src/huge.py")
    assert response.status_code == 413
    assert "30,000 lines, more than the 20,000 shown whole" in response.content.decode()
    monkeypatch.setattr(diff_render, "WHOLE_FILE_MAX_BYTES", 500)
    response = whole(client, reviewed_change.session, "src/app.py")
    assert response.status_code == 413
    assert "src/app.py is 1 KB, more than the 500 bytes shown whole" in response.content.decode()


def test_the_huge_files_diff_is_shown_plain_and_cut(client, team, reviewed_change):
    client.force_login(team.reviewer)
    page = client.get(reviewed_change.session.get_absolute_url()).content.decode()
    assert "Shown without highlighting" in page
    assert "The patch was cut here" in page


def test_an_unknown_language_reads_as_plain_text(client, team, reviewed_change):
    client.force_login(team.reviewer)
    response = whole(client, reviewed_change.session, "notes.zzq")
    assert response.status_code == 200
    assert "no known language &lt;i&gt;" in response.content.decode()
    page = client.get(reviewed_change.session.get_absolute_url()).content.decode()
    assert '<span class="lang">plain text</span>' in page
    assert '<span class="lang">Python</span>' in page


def test_a_commit_that_is_not_an_id_is_refused(client, team, reviewed_change):
    client.force_login(team.reviewer)
    response = whole(client, reviewed_change.session, "src/app.py", commit="HEAD;rm -rf /")
    assert response.status_code == 400
    assert "commit must be a commit id" in response.content.decode()


def test_with_no_copy_of_the_commits_left_it_says_what_was_kept(client, team, reviewed_change):
    import shutil  # noqa: PLC0415 - only this test removes the mirror

    shutil.rmtree(mirror.mirror_path(team.repository.name))
    client.force_login(team.reviewer)
    response = whole(client, reviewed_change.session, "src/app.py")
    assert response.status_code == 409
    assert "The diff above is all that was kept" in response.content.decode()


def test_viewed_is_kept_per_reviewer_and_survives_a_reload(client, team, reviewed_change):
    session = reviewed_change.session
    payload = reviewed_change.diff("src/app.py")
    key = diff_render.file_key("src/app.py", payload["patch"])
    client.force_login(team.reviewer)
    response = mark(client, session, "src/app.py", key)
    assert response.status_code == 200 and response.json() == {"viewed": True}
    mark(client, session, "src/app.py", key)  # twice is once
    assert ViewedFile.objects.filter(session=session).count() == 1

    page = client.get(session.get_absolute_url()).content.decode()
    assert viewed_keys(page) == [key]
    client.force_login(team.manager)  # another reviewer has marked nothing
    assert viewed_keys(client.get(session.get_absolute_url()).content.decode()) == []

    client.force_login(team.reviewer)
    assert mark(client, session, "src/app.py", key, viewed="0").json() == {"viewed": False}
    assert viewed_keys(client.get(session.get_absolute_url()).content.decode()) == []


def test_viewed_refuses_what_is_not_in_the_diff(client, team, reviewed_change):
    session = reviewed_change.session
    client.force_login(team.reviewer)
    response = mark(client, session, "src/app.py", "f" * 40)
    assert response.status_code == 404
    assert "reload the page" in response.json()["error"]
    assert mark(client, session, "../secret", "f" * 40).status_code == 400
    assert mark(client, session, "src/app.py", "f" * 40, viewed="maybe").status_code == 400
    assert not ViewedFile.objects.exists()


def viewed_keys(page: str) -> list[str]:
    found = re.search(r'<script id="diff-viewed" type="application/json">(.*?)</script>', page)
    return json.loads(found.group(1))
