"""Settings › Repositories: a site admin adds a repository (its default branch detected), a
repository admin changes the default branch and archives it; bad input is named on the form and
saves nothing; an archived repository starts nothing new. The CLI does the same."""

from __future__ import annotations

import subprocess

import pytest
from django.test import Client

from approvals.models import AuditEntry
from sessions.services import SessionError, session_create
from snapshots.models import Repository
from snapshots.repositories import repository_archive
from snapshots.tasks import refresh_due_snapshots

pytestmark = pytest.mark.django_db
LIST = "/settings/repositories/"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def git_repo(tmp_path, name: str, branch: str, *, others: tuple[str, ...] = ()):
    path = tmp_path / name
    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True)
    (path / "README").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.org",
         "commit", "-qm", "first"],
        check=True,
    )  # fmt: skip
    for other in others:
        subprocess.run(["git", "-C", str(path), "branch", other], check=True)
    return path


def test_a_site_admin_adds_a_repository_on_master(team, tmp_path):
    path = git_repo(tmp_path, "legacy", "master")
    response = _client(team.admin).post(LIST, {"name": "legacy", "url": str(path), "branch": ""})
    assert response.status_code == 302 and response["Location"].endswith("/legacy/")
    repository = Repository.objects.get(name="legacy")
    assert repository.default_branch == "master"
    entry = AuditEntry.objects.get(action="repository.add")
    assert entry.actor == team.admin and entry.data["branch_detected"]


def test_the_form_is_prefilled_from_the_query(team):
    page = _client(team.admin).get(LIST + "?name=from-github&url=https://example.org/o/r.git")
    text = page.content.decode()
    assert 'value="from-github"' in text and 'value="https://example.org/o/r.git"' in text


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"name": "plain", "url": "PLAIN"}, "url", "cannot read"),
        ({"name": "gone", "url": "/nowhere/at/all"}, "url", "does not exist"),
        ({"name": "legacy", "url": "LEGACY", "branch": "main"}, "branch", "no branch"),
        ({"name": "widgets", "url": "LEGACY"}, "name", "already exists"),
        ({"name": "Bad Name", "url": "LEGACY"}, "name", "name:"),
    ],
)
def test_bad_input_is_named_on_the_form_and_saves_nothing(team, tmp_path, data, field, message):
    (tmp_path / "plain").mkdir()
    legacy = git_repo(tmp_path, "legacy", "master")
    data = {**data, "url": data["url"].replace("PLAIN", str(tmp_path / "plain"))}
    data["url"] = data["url"].replace("LEGACY", str(legacy))
    before = Repository.objects.count()
    response = _client(team.admin).post(LIST, data)
    assert response.status_code == 400
    text = response.content.decode()
    assert f'id="id_{field}-error"' in text and message in text
    assert Repository.objects.count() == before
    assert not AuditEntry.objects.filter(action="repository.add").exists()


def test_only_site_admins_add_repositories(team, tmp_path):
    path = git_repo(tmp_path, "legacy", "master")
    outsider = _client(team.outsider)  # admin of gadgets, not a site admin
    assert b"Add a repository" not in outsider.get(LIST).content
    assert outsider.post(LIST, {"name": "sneaky", "url": str(path)}).status_code == 403
    assert _client(team.engineer).post(LIST, {"name": "x", "url": str(path)}).status_code == 403
    assert not Repository.objects.filter(name__in=["sneaky", "x"]).exists()


def test_the_default_branch_changes_only_to_an_existing_branch(team, tmp_path):
    path = git_repo(tmp_path, "multi", "main", others=("release",))
    Repository.objects.filter(pk=team.repository.pk).update(url=str(path))
    client = _client(team.admin)
    missing = client.post("/settings/repositories/widgets/", {"branch": "nope"})
    assert missing.status_code == 400 and "no branch" in missing.content.decode()
    assert Repository.objects.get(pk=team.repository.pk).default_branch == "main"
    client.post("/settings/repositories/widgets/", {"branch": "release"})
    assert Repository.objects.get(pk=team.repository.pk).default_branch == "release"
    entry = AuditEntry.objects.get(action="repository.branch")
    assert entry.data == {"from": "main", "to": "release"} and entry.actor == team.admin


def test_an_archived_repository_starts_nothing_new(team):
    client = _client(team.admin)
    client.post("/settings/repositories/widgets/archive/")
    repository = Repository.objects.get(pk=team.repository.pk)
    assert repository.archived_at is not None
    assert AuditEntry.objects.filter(action="repository.archive").count() == 1
    with pytest.raises(SessionError, match="archived"):
        session_create(repository=repository, creator=team.admin, prompt="hello")
    new_task = client.get("/sessions/new/").content.decode()
    assert f'value="{repository.pk}"' not in new_task
    assert "widgets" not in client.get("/").content.decode().split('id="repos"')[1][:600]
    assert repository.pk not in refresh_due_snapshots()
    # Its history stays, and unarchiving brings it back.
    assert b"widgets" in client.get(LIST).content
    client.post("/settings/repositories/widgets/archive/", {"undo": "1"})
    assert Repository.objects.get(pk=team.repository.pk).archived_at is None
    assert AuditEntry.objects.filter(action="repository.unarchive").count() == 1


def test_the_scheduled_refresh_skips_archived_repositories(team):
    repository_archive(team.repository, by=team.admin)
    due = refresh_due_snapshots()
    assert team.other_repository.pk in due and team.repository.pk not in due


def test_repository_pages_refuse_engineers_and_non_members(team):
    engineer = _client(team.engineer)
    assert engineer.post("/settings/repositories/widgets/", {"branch": "x"}).status_code == 403
    assert engineer.post("/settings/repositories/widgets/archive/").status_code == 403
    outsider = _client(team.outsider)
    assert outsider.post("/settings/repositories/widgets/archive/").status_code == 404
    assert Repository.objects.get(pk=team.repository.pk).archived_at is None


def test_the_cli_changes_the_branch_and_archives(team, tmp_path, inspect_cli):
    path = git_repo(tmp_path, "multi", "main", others=("release",))
    Repository.objects.filter(pk=team.repository.pk).update(url=str(path))
    code, _, err = inspect_cli("repo", "branch", "widgets", "nope")
    assert code == 1 and "no branch" in err
    assert inspect_cli("repo", "branch", "widgets", "release")[0] == 0
    assert Repository.objects.get(pk=team.repository.pk).default_branch == "release"
    assert inspect_cli("repo", "archive", "widgets")[0] == 0
    assert "(archived)" in inspect_cli("repo", "list")[1]
    assert inspect_cli("repo", "archive", "widgets", "--undo")[0] == 0
    assert Repository.objects.get(pk=team.repository.pk).archived_at is None
    actions = AuditEntry.objects.filter(action__startswith="repository.")
    assert list(actions.values_list("action", flat=True)) == [
        "repository.branch",
        "repository.archive",
        "repository.unarchive",
    ]
    assert {entry.actor for entry in actions} == {team.admin}
