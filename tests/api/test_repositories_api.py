"""POST /api/repositories/: site admins add a repository through the same action as the CLI and
the settings page; the default branch is detected; bad input names the field and saves nothing."""

from __future__ import annotations

import subprocess

import pytest

from snapshots.models import Repository


def _repo_on(tmp_path, branch: str) -> str:
    path = tmp_path / branch
    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.org",
         "commit", "-q", "--allow-empty", "-m", "first"],
        check=True,
    )  # fmt: skip
    return str(path)


@pytest.mark.django_db
def test_site_admin_adds_a_repository_on_master(api, team, tmp_path):
    response = api(team.admin).post(
        "/api/repositories/", {"name": "legacy", "url": _repo_on(tmp_path, "master")}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["default_branch"] == "master"
    assert response.json()["role"] == "admin"


@pytest.mark.django_db
def test_refusals(api, team, tmp_path):
    engineer = api(team.engineer).post(
        "/api/repositories/", {"name": "x", "url": _repo_on(tmp_path, "main")}, format="json"
    )
    assert engineer.status_code == 403 and "site admin" in engineer.json()["detail"]
    bad = api(team.admin).post(
        "/api/repositories/", {"name": "plain", "url": str(tmp_path)}, format="json"
    )
    assert bad.status_code == 400 and "url" in bad.json()["fields"]
    branch = api(team.admin).post(
        "/api/repositories/",
        {"name": "legacy", "url": _repo_on(tmp_path, "trunk"), "branch": "main"},
        format="json",
    )
    assert branch.status_code == 400 and "no branch 'main'" in branch.json()["fields"]["branch"][0]
    assert not Repository.objects.filter(name__in=["x", "plain", "legacy"]).exists()
