import pytest

from accounts.models import Membership
from snapshots.models import Repository

pytestmark = pytest.mark.django_db


def test_a_local_repository_is_added_with_the_admins_as_members(
    inspect_cli, make_git_repo, django_user_model
):
    admin = django_user_model.objects.create_superuser("root", password="pw")
    upstream = make_git_repo()
    code, out, _ = inspect_cli("repo", "add", "widgets", "--url", str(upstream.path))
    assert code == 0
    assert "added repository widgets" in out
    repository = Repository.objects.get(name="widgets")
    assert Membership.objects.get(repository=repository).user == admin


def test_members_can_be_named(inspect_cli, make_git_repo, django_user_model):
    django_user_model.objects.create_user("ada")
    upstream = make_git_repo()
    code, out, _ = inspect_cli(
        "repo", "add", "widgets", "--url", str(upstream.path), "--member", "ada:engineer"
    )
    assert code == 0
    assert Membership.objects.get().role == "engineer"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/nonexistent/repo", "/nonexistent/repo does not exist"),
        ("file:///nonexistent/repo.git", "does not appear to be a git repository"),
    ],
)
def test_a_bad_url_is_refused_and_nothing_is_added(inspect_cli, url, message):
    code, _, err = inspect_cli("repo", "add", "widgets", "--url", url)
    assert code == 1
    assert message in err
    assert "the repository was not added" in err
    assert not Repository.objects.exists()


def test_a_directory_that_is_not_git_is_refused(inspect_cli, tmp_path):
    code, _, err = inspect_cli("repo", "add", "widgets", "--url", str(tmp_path))
    assert code == 1
    assert "does not appear to be a git repository" in err
    assert not Repository.objects.exists()


def test_a_missing_branch_is_refused(inspect_cli, make_git_repo):
    upstream = make_git_repo()
    code, _, err = inspect_cli(
        "repo", "add", "widgets", "--url", str(upstream.path), "--branch", "develop"
    )
    assert code == 1
    assert "has no branch 'develop'" in err


def test_a_bad_name_is_refused(inspect_cli, make_git_repo):
    upstream = make_git_repo()
    code, _, err = inspect_cli("repo", "add", "Not A Slug", "--url", str(upstream.path))
    assert code == 1
    assert err.startswith("CommandError: name:")
