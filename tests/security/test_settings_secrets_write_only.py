"""Attack: read a repository secret back from the settings area. A value typed on the secrets
page must never come back: not on the page, not in the form re-shown after an error, not in a
message, not in the audit log — not even its length — nor in the build log the recipe page
shows live."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals.models import AuditEntry, RepositorySecret
from approvals.secrets import secret_set
from inspect_web.redis_client import get_redis
from snapshots.build import snapshot_build

pytestmark = pytest.mark.django_db

URL = "/settings/repositories/widgets/secrets/"
VALUE = "s3cr3t-Value-7f4e2a9b"


def _admin(team) -> Client:
    client = Client()
    client.force_login(team.admin)
    return client


def _assert_absent(html: str) -> None:
    assert VALUE not in html
    assert VALUE[:8] not in html  # nor a prefix of it
    assert f'maxlength="{len(VALUE)}"' not in html and f"{len(VALUE)} characters" not in html


def test_the_value_never_comes_back_after_saving_or_replacing(team):
    client = _admin(team)
    saved = client.post(URL, {"name": "DEPLOY_KEY", "scope": "agent", "value": VALUE}, follow=True)
    assert saved.status_code == 200 and "DEPLOY_KEY" in saved.content.decode()
    _assert_absent(saved.content.decode())
    _assert_absent(client.get(URL).content.decode())
    _assert_absent(client.get(URL + "?name=DEPLOY_KEY").content.decode())  # the "Replace" form
    replaced = client.post(
        URL, {"name": "DEPLOY_KEY", "scope": "setup_start", "value": VALUE + "-2"}, follow=True
    )
    _assert_absent(replaced.content.decode())
    assert RepositorySecret.objects.get(name="DEPLOY_KEY").encrypted_value.find(VALUE) == -1


def test_a_refused_save_does_not_echo_the_value_into_the_form(team):
    refused = _admin(team).post(URL, {"name": "bad name", "scope": "agent", "value": VALUE})
    assert refused.status_code == 400
    html = refused.content.decode()
    assert "an environment variable name" in html
    _assert_absent(html)
    assert 'name="value"' in html and 'value="' not in html.split('name="value"')[1].split(">")[0]


def test_audit_entries_name_the_secret_never_its_value(team):
    client = _admin(team)
    client.post(URL, {"name": "DEPLOY_KEY", "scope": "agent", "value": VALUE})
    client.post(URL, {"name": "DEPLOY_KEY", "scope": "agent", "value": VALUE + "x"})
    client.post("/settings/repositories/widgets/secrets/DEPLOY_KEY/delete/")
    entries = AuditEntry.objects.filter(action__startswith="secret.")
    assert entries.count() == 3
    for entry in entries:
        assert VALUE not in repr(entry.data) and VALUE not in str(entry.object_id)
        assert entry.data.get("name") == "DEPLOY_KEY"


def test_the_live_build_log_never_holds_a_secret(team, make_git_repo):
    upstream = make_git_repo(
        files={".inspect/environment.toml": 'setup = ["echo token=$DEPLOY_KEY"]\n'}
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    secret_set(repository=team.repository, name="DEPLOY_KEY", value=VALUE, by=team.admin)
    snapshot = snapshot_build(team.repository)
    assert snapshot.state == "ready", snapshot.error
    stored = get_redis().lrange(f"inspect:snapshot-build-log:{snapshot.pk}", 0, -1)
    assert any(b"token=[redacted]" in line for line in stored)
    assert not any(VALUE.encode() in line for line in stored)
    html = (
        _admin(team)
        .get(
            "/settings/repositories/widgets/recipe/build/log/",
            {"snapshot": snapshot.pk, "after": 0},
        )
        .content.decode()
    )
    assert "token=[redacted]" in html
    _assert_absent(html)
