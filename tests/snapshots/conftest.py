import pytest


@pytest.fixture
def widgets(inspect_cli, make_git_repo, team):
    """The `widgets` repository of the team fixture, pointing at a real upstream repo."""
    upstream = make_git_repo(
        files={
            "README.md": "# widgets\n",
            "requirements.txt": "six==1.16.0\n",
            ".inspect/environment.toml": 'setup = ["echo setup-ran >> setup.log"]\n',
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    team.repository.upstream = upstream
    return team.repository
