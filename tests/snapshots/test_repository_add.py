"""Adding a repository: the default branch is the remote's own, bad URLs are refused with the
reason and save nothing."""

from __future__ import annotations

import subprocess

import pytest

from approvals.models import AuditEntry
from snapshots.models import Repository
from snapshots.repositories import RepositoryRefused, detect_default_branch, repository_add


def _repo(tmp_path, branch: str):
    path = tmp_path / f"on-{branch}"
    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True)
    (path / "README").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.org",
         "commit", "-qm", "first"],
        check=True,
    )  # fmt: skip
    return path


@pytest.mark.parametrize("branch", ["master", "main", "trunk"])
def test_default_branch_is_detected(tmp_path, branch):
    assert detect_default_branch(str(_repo(tmp_path, branch))) == branch


@pytest.mark.django_db
def test_added_with_the_remote_default_and_audited(tmp_path, team):
    repository = repository_add(name="legacy", url=str(_repo(tmp_path, "master")), by=team.admin)
    assert repository.default_branch == "master"
    assert repository.memberships.filter(user=team.admin, role="admin").exists()
    entry = AuditEntry.objects.get(action="repository.add", object_id=str(repository.pk))
    assert entry.data["default_branch"] == "master" and entry.data["branch_detected"]


@pytest.mark.django_db
def test_bad_input_saves_nothing(tmp_path, team):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RepositoryRefused, match="not a git repository|does not appear"):
        repository_add(name="plain", url=str(plain), by=team.admin)
    with pytest.raises(RepositoryRefused, match="does not exist"):
        repository_add(name="gone", url=str(tmp_path / "gone"), by=team.admin)
    with pytest.raises(RepositoryRefused, match="no branch 'main'") as refused:
        repository_add(name="legacy", url=str(_repo(tmp_path, "master")), branch="main", by=None)
    assert refused.value.field == "branch"
    with pytest.raises(RepositoryRefused, match="already exists"):
        repository_add(name="widgets", url=str(_repo(tmp_path, "trunk")), by=None)
    assert not Repository.objects.filter(name__in=["plain", "gone", "legacy"]).exists()
