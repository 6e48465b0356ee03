"""The API changes a repository's default branch and archives it through the same actions as
the settings page and the CLI (snapshots.repositories): repository admins only, audited, a
refusal named on its field."""

from __future__ import annotations

import pytest

from approvals.models import AuditEntry
from snapshots.models import Repository
from tests.settings_area.test_repository_settings import git_repo

pytestmark = pytest.mark.django_db


def test_an_admin_changes_the_branch_and_a_missing_one_is_named(api, team, tmp_path):
    path = git_repo(tmp_path, "multi", "main", others=("release",))
    Repository.objects.filter(pk=team.repository.pk).update(url=str(path))
    client = api(team.admin)
    missing = client.post("/api/repositories/widgets/branch/", {"branch": "nope"}, format="json")
    assert missing.status_code == 400 and "no branch" in missing.json()["fields"]["branch"][0]
    done = client.post("/api/repositories/widgets/branch/", {"branch": "release"}, format="json")
    assert done.status_code == 200 and done.json()["default_branch"] == "release"
    assert AuditEntry.objects.get(action="repository.branch").actor == team.admin


def test_archive_and_unarchive(api, team):
    client = api(team.admin)
    archived = client.post("/api/repositories/widgets/archive/", {}, format="json")
    assert archived.status_code == 200 and archived.json()["archived"] is True
    listed = {r["name"]: r for r in client.get("/api/repositories/").json()}
    assert listed["widgets"]["archived"] is True
    refused = api(team.engineer).post(
        "/api/sessions/", {"repository": "widgets", "prompt": "hello"}, format="json"
    )
    assert refused.status_code == 400 and "archived" in refused.json()["detail"]
    back = client.post("/api/repositories/widgets/archive/", {"archived": False}, format="json")
    assert back.status_code == 200 and back.json()["archived"] is False
    actions = AuditEntry.objects.filter(action__startswith="repository.")
    assert list(actions.values_list("action", flat=True)) == [
        "repository.archive",
        "repository.unarchive",
    ]


def test_engineers_get_403_and_non_members_404(api, team):
    engineer = api(team.engineer)
    for path in ("/api/repositories/widgets/archive/", "/api/repositories/widgets/branch/"):
        assert engineer.post(path, {"branch": "x"}, format="json").status_code == 403
        assert api(team.outsider).post(path, {"branch": "x"}, format="json").status_code == 404
    assert Repository.objects.get(pk=team.repository.pk).archived_at is None
