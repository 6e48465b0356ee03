import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
}


class GitRepo:
    """A real git repository on disk, the kind `inspect repo add --url PATH` accepts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.git("init", "--quiet", "--initial-branch=main")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.path, env=GIT_ENV, check=True, capture_output=True, text=True
        ).stdout

    def commit(self, files: dict[str, str], message: str = "change") -> str:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git("add", "-A")
        self.git("commit", "--quiet", "-m", message)
        return self.git("rev-parse", "HEAD").strip()


@pytest.fixture
def make_git_repo(tmp_path):
    def make(name: str = "upstream", files: dict[str, str] | None = None) -> GitRepo:
        path = tmp_path / name
        path.mkdir()
        repo = GitRepo(path)
        repo.commit(files or {"README.md": "# hello\n"}, "initial")
        return repo

    return make


@pytest.fixture
def inspect_cli(capsys):
    """Run `manage.py inspect …` in-process; returns (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code, error = 0, ""
        try:
            call_command("inspect", *args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except CommandError as exc:
            code, error = 1, f"CommandError: {exc}\n"
        captured = capsys.readouterr()
        return code, captured.out, captured.err + error

    return run


@pytest.fixture(autouse=True)
def private_data_dir(settings, tmp_path):
    """Mirrors and build dirs per test; the sandbox backend's own root stays shared."""
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    return settings.DATA_DIR


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
