"""The secrets page: add, replace and delete through approvals.secrets (validated, audited);
the scope and when each secret was last given to a command; the value never rendered back."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import AuditEntry, RepositorySecret
from approvals.secrets import secret_env, secret_set

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


URL = "/settings/repositories/widgets/secrets/"


def test_access_admin_engineer_and_non_member(team):
    assert reverse("settings_area:secrets", args=["widgets"]) == URL
    assert _client(team.admin).get(URL).status_code == 200
    assert _client(team.outsider).get("/settings/repositories/gadgets/secrets/").status_code == 200
    engineer = _client(team.engineer)
    assert engineer.get(URL).status_code == 403
    assert (
        engineer.post(URL, {"name": "X_TOKEN", "scope": "agent", "value": "v" * 20}).status_code
        == 403
    )
    assert not RepositorySecret.objects.exists()
    assert _client(team.outsider).get(URL).status_code == 404
    delete = reverse("settings_area:secret_delete", args=["widgets", "X_TOKEN"])
    assert _client(team.outsider).post(delete).status_code == 404


def test_add_replace_and_delete_are_audited(team):
    client = _client(team.admin)
    added = client.post(
        URL, {"name": "NPM_TOKEN", "scope": "setup_start", "value": "first-value-123"}
    )
    assert added.status_code == 302
    row = RepositorySecret.objects.get(name="NPM_TOKEN")
    assert row.scope == "setup_start" and row.updated_by == team.admin
    client.post(URL, {"name": "NPM_TOKEN", "scope": "agent", "value": "second-value-456"})
    assert secret_env(team.repository, scope="agent") == {"NPM_TOKEN": "second-value-456"}
    assert RepositorySecret.objects.get(name="NPM_TOKEN").scope == "agent"
    page = client.get(URL).content.decode()
    assert "NPM_TOKEN" in page and "setup, start and the agent" in page
    deleted = client.post(reverse("settings_area:secret_delete", args=["widgets", "NPM_TOKEN"]))
    assert deleted.status_code == 302
    assert not RepositorySecret.objects.exists()
    actions = list(AuditEntry.objects.order_by("pk").values_list("action", flat=True))
    assert [a for a in actions if a.startswith("secret.")] == [
        "secret.add", "secret.change", "secret.delete"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("npm-token", "long-enough-value", "an environment variable name, e.g. NPM_TOKEN"),
        ("1TOKEN", "long-enough-value", "an environment variable name, e.g. NPM_TOKEN"),
        ("NPM_TOKEN", "short", "a secret must be at least 8 characters long"),
    ],
)
def test_bad_input_gets_the_existing_message_and_saves_nothing(team, name, value, message):
    response = _client(team.admin).post(URL, {"name": name, "scope": "agent", "value": value})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not RepositorySecret.objects.exists()
    assert not AuditEntry.objects.filter(action__startswith="secret.").exists()


def test_last_used_is_set_when_a_command_is_given_the_secrets(team):
    secret_set(repository=team.repository, name="SETUP_ONLY", value="value-one-123", by=team.admin)
    secret_set(
        repository=team.repository, name="FOR_AGENT", value="value-two-456", scope="agent",
        by=team.admin,
    )  # fmt: skip
    assert "<td>never</td>" in _client(team.admin).get(URL).content.decode()
    secret_env(team.repository, scope="agent")
    used = dict(RepositorySecret.objects.values_list("name", "last_used_at"))
    assert used["FOR_AGENT"] is not None and used["SETUP_ONLY"] is None
    secret_env(team.repository, scope="setup_start")
    assert all(RepositorySecret.objects.values_list("last_used_at", flat=True))
    page = _client(team.admin).get(URL).content.decode()
    assert "<td>never</td>" not in page


def test_the_value_field_is_a_password_input_never_filled(team):
    page = _client(team.admin).get(URL + "?name=NOPE").content.decode()
    assert 'type="password" name="value"' in page and 'autocomplete="new-password"' in page


def test_the_cli_lists_when_each_secret_was_last_used(team, inspect_cli):
    secret_set(repository=team.repository, name="NPM_TOKEN", value="value-one-123", by=team.admin)
    code, out, _ = inspect_cli("secret", "list", "widgets")
    assert code == 0 and "NPM_TOKEN  setup_start  updated " in out and "last used never" in out
    secret_env(team.repository, scope="setup_start")
    _, out, _ = inspect_cli("secret", "list", "widgets")
    assert "last used never" not in out and "value-one-123" not in out
