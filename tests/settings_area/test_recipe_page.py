"""The recipe page: the file, the override and the recipe in force; the editor checked by the
build's own parser (line and column), saved through `inspect recipe set`'s action; egress still
waits for approval; "Build now" with its log read while it runs."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest, AuditEntry
from snapshots.build import snapshot_build
from snapshots.models import Snapshot

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _url(name: str = "settings_area:recipe", repository: str = "widgets") -> str:
    return reverse(name, args=[repository])


def test_access_admin_engineer_and_non_member(team):
    assert _client(team.admin).get(_url()).status_code == 200
    assert _client(team.engineer).get(_url()).status_code == 403
    assert _client(team.engineer).post(_url(), {"text": ""}).status_code == 403
    assert _client(team.engineer).post(_url("settings_area:recipe_build")).status_code == 403
    assert _client(team.outsider).get(_url()).status_code == 404
    assert _client(team.outsider).post(_url("settings_area:recipe_validate")).status_code == 404
    assert _client(team.outsider).get(_url("settings_area:recipe_build_log")).status_code == 404


def test_shows_the_file_from_the_mirror_the_override_and_the_recipe_in_force(team, make_git_repo):
    upstream = make_git_repo(
        files={".inspect/environment.toml": 'setup = ["echo from-the-file"]\nverify = ["true"]\n'}
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    page = _client(team.admin).get(_url()).content.decode()
    assert "not fetched yet" in page
    snapshot_build(team.repository)  # fetches the mirror
    page = _client(team.admin).get(_url()).content.decode()
    assert "echo from-the-file" in page and ".inspect/environment.toml on main" in page
    assert "From .inspect/environment.toml." in page

    team.repository.recipe_override = 'setup = ["echo from-the-dashboard"]\n'
    team.repository.save()
    page = _client(team.admin).get(_url()).content.decode()
    assert "From the recipe set in the dashboard." in page
    assert page.count("echo from-the-dashboard") == 2  # in the editor and in force
    assert "echo from-the-file" in page  # the file is still shown


def test_the_checker_gives_line_and_column_for_syntax_and_schema_errors(team):
    client = _client(team.admin)
    check = _url("settings_area:recipe_validate")
    bad = client.post(check, {"text": 'setup = ["ok"]\nverify = [\n  "pytest" "-q"\n]\n'})
    body = bad.content.decode()
    assert "line 3, column 12" in body and "does not parse" in body
    assert 'id="save-recipe" hx-swap-oob="true" disabled' in body
    unknown = client.post(check, {"text": 'setup = ["ok"]\n\n  stup = ["typo"]\n'}).content.decode()
    assert "line 3, column 3" in unknown and "unknown key &#x27;stup&#x27;" in unknown
    wrong = client.post(check, {"text": 'setup = ["a"]\nrefresh_minutes = "soon"\n'})
    assert "line 2, column 1" in wrong.content.decode() and "whole number" in wrong.content.decode()
    nested = client.post(
        check, {"text": '[preview]\ncommand = "serve"\nurl = "http://example.com/"\n'}
    ).content.decode()
    assert "line 3, column 1" in nested and "preview.url" in nested
    good = client.post(check, {"text": 'setup = ["make"]\n'}).content.decode()
    assert "Valid." in good and "disabled" not in good


def test_a_recipe_with_an_error_is_not_saved(team):
    response = _client(team.admin).post(_url(), {"text": 'setup = ["a"]\nbogus = 1\n'})
    assert response.status_code == 400
    assert "line 2, column 1" in response.content.decode()
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == ""
    assert not AuditEntry.objects.filter(action="repository.recipe").exists()


def test_saving_uses_the_cli_action_and_is_audited(team):
    response = _client(team.admin).post(_url(), {"text": 'setup = ["make deps"]\n'}, follow=True)
    assert "Recipe of widgets saved." in response.content.decode()
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == 'setup = ["make deps"]\n'
    entry = AuditEntry.objects.get(action="repository.recipe")
    assert entry.actor == team.admin


def test_wider_egress_from_the_editor_waits_for_a_reviewer(team):
    text = 'egress = { mode = "open" }\n'
    check = _client(team.admin).post(_url("settings_area:recipe_validate"), {"text": text})
    assert "waits for a reviewer other than you" in check.content.decode()
    response = _client(team.admin).post(_url(), {"text": text}, follow=True)
    assert "approval request" in response.content.decode()
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == "" and team.repository.approved_network.mode == "none"
    pending = ApprovalRequest.objects.get(action="widen_egress")
    assert pending.requested_by == team.admin and pending.state == "pending"


def _poll(client, params: dict) -> str:
    return client.get(_url("settings_area:recipe_build_log"), params).content.decode()


def test_build_log_endpoint_reads_the_live_log_then_the_final_state(team, make_git_repo):
    upstream = make_git_repo(files={".inspect/environment.toml": 'setup = ["echo hello-build"]\n'})
    team.repository.url = str(upstream.path)
    team.repository.save()
    client = _client(team.admin)
    since = f"{time.time():.3f}"
    waiting = _poll(client, {"since": since, "after": 0})
    assert "Queued: waiting for a worker" in waiting and 'hx-trigger="load delay:500ms"' in waiting
    snapshot = snapshot_build(team.repository)
    body = _poll(client, {"since": since, "after": 0})
    assert "$ echo hello-build" in body and "hello-build</div>" in body
    assert f'data-state="ready">Build ready: <a href="/snapshots/{snapshot.pk}/' in body
    assert "build-poll" not in body  # the build ended: no more polling
    rest = _poll(client, {"snapshot": snapshot.pk, "after": 3})
    assert "$ git fetch" not in rest
    other = Snapshot.objects.create(repository=team.other_repository, branch="main")
    assert "build-line" not in _poll(client, {"snapshot": other.pk, "after": 0})
