"""`inspect github link`: a repository becomes a GitHub one only once the App can read it."""

import pytest

from integrations.github.models import GitHubLink
from snapshots.models import Repository
from tests.integrations.github.conftest import REPO

pytestmark = pytest.mark.django_db


def test_linking_adds_the_repository_and_checks_the_app_can_read_it(
    github_server, inspect_cli, team
):
    code, out, err = inspect_cli("github", "link", "octo", REPO, "--url", github_server.clone_url)
    assert code == 0, err
    assert f"added and linked octo to {REPO} on GitHub (App installation 77" in out
    link = GitHubLink.objects.get(repository__name="octo")
    assert (link.full_name, link.installation_id) == (REPO, 77)
    assert link.repository.memberships.get().user == team.admin  # the superuser, as admin
    assert github_server.calls("GET", "/octo-org/widgets.git/info/refs")
    assert github_server.problems == []

    code, out, err = inspect_cli("github", "unlink", "octo")
    assert code == 0 and not GitHubLink.objects.exists()


def test_a_repository_the_app_cannot_reach_is_not_linked(github_server, inspect_cli, team):
    github_server.uninstall(REPO)
    code, out, err = inspect_cli("github", "link", "octo", REPO, "--url", github_server.clone_url)
    assert code == 1
    assert f"the GitHub App is not installed on {REPO} (404" in err
    assert "octo was not linked" in err
    assert not Repository.objects.filter(name="octo").exists()
    assert not GitHubLink.objects.exists()

    code, out, err = inspect_cli("github", "link", "widgets", "nonsense")
    assert code == 1 and "'nonsense' is not OWNER/NAME" in err
