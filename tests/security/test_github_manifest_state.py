"""Connect GitHub's callback stores a GitHub App only for the site admin who started the flow in
this browser session, once: a forged, replayed or foreign `state`, or a user who is not a site
admin, stores nothing (and a code an attacker got hold of is not spent for them)."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals.models import AuditEntry
from inspect_web import site_settings
from inspect_web.models import SiteSetting
from tests.integrations.github import manifest_flow
from tests.integrations.github.conftest import bare_github  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_settings():
    site_settings.forget()
    yield
    site_settings.forget()


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def started(client, fake) -> str:
    action, posted = manifest_flow.start(client, web_url=fake.url)
    return manifest_flow.callback_path(manifest_flow.create_on_github(action, posted))


def nothing_stored() -> bool:
    return (
        not SiteSetting.objects.exists()
        and not AuditEntry.objects.filter(action="github.app_connect").exists()
    )


def test_a_forged_state_stores_nothing(team, bare_github):  # noqa: F811
    admin = client_of(team.admin)
    path = started(admin, bare_github)
    code = path.split("code=")[1].split("&")[0]
    for forged in (f"/settings/github/callback/?code={code}&state=%C3%A9t%C3%A9",
                   f"/settings/github/callback/?code={code}&state=forged",
                   f"/settings/github/callback/?code={code}"):  # fmt: skip
        answer = admin.get(forged)
        assert answer.status_code == 400
        assert "does not belong to a Connect GitHub started in this browser" in (
            answer.content.decode()
        )
    assert nothing_stored()
    # The forged attempt used up the pending flow, so even the real answer is refused now.
    assert admin.get(path).status_code == 400
    assert nothing_stored()
    assert not bare_github.calls("POST", r"/api/v3/app-manifests/.*")


def test_a_replayed_callback_stores_nothing_more(team, bare_github):  # noqa: F811
    admin = client_of(team.admin)
    path = started(admin, bare_github)
    assert admin.get(path).status_code == 302
    rows = dict(SiteSetting.objects.values_list("name", "value"))
    assert admin.get(path).status_code == 400
    assert dict(SiteSetting.objects.values_list("name", "value")) == rows
    assert AuditEntry.objects.filter(action="github.app_connect").count() == 1
    assert len(bare_github.calls("POST", r"/api/v3/app-manifests/.*")) == 1


def test_another_admins_session_cannot_complete_the_flow(team, bare_github, django_user_model):  # noqa: F811
    other_admin = django_user_model.objects.create_user("other-admin", is_staff=True)
    path = started(client_of(team.admin), bare_github)
    answer = client_of(other_admin).get(path)  # a link sent to another admin
    assert answer.status_code == 400
    assert nothing_stored()


def test_a_user_who_is_not_a_site_admin_stores_nothing(team, bare_github):  # noqa: F811
    path = started(client_of(team.admin), bare_github)
    for user in (team.engineer, team.manager, team.outsider):
        assert client_of(user).get(path).status_code == 403
        assert client_of(user).post("/settings/github/add/", {
            "installation_id": 1, "full_name": "octo-org/gizmos", "name": "gizmos"
        }).status_code == 403  # fmt: skip
    assert Client().get(path).status_code == 302  # signed out: to the login page
    assert nothing_stored()
    assert not bare_github.calls("POST", r"/api/v3/app-manifests/.*")
