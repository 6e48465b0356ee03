import json

import pytest


@pytest.fixture
def ready_repo(inspect_cli, make_git_repo, team):
    """`widgets` with a real upstream, a verify command and a ready snapshot."""
    upstream = make_git_repo(
        files={
            "README.md": "# widgets\n",
            "AGENTS.md": "Be brief.\n",
            ".inspect/environment.toml": 'setup = ["mkdir -p build && echo ok > build/out"]\n'
            'verify = ["test -f README.md", "echo checked"]\n',
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    team.repository.upstream = upstream
    return team.repository


@pytest.fixture
def create_session(inspect_cli):
    def create(*args: str) -> tuple[int, dict | None, str]:
        code, out, err = inspect_cli("session", "create", "widgets", "--json", *args)
        lines = out.strip().splitlines()
        return code, (json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None), err

    return create
