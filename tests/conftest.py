"""Shared fixtures: real PostgreSQL/SQLite and Redis, and a ready-made permission matrix.

Every repository-scoped test gets an engineer, a reviewer, a manager, an admin and an outsider
(a user who is a member of another repository only), as healthchecks' BaseTestCase does.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command


def pytest_configure(config) -> None:
    # Hashing passwords at full strength costs ~0.3 s per user; tests only need it to work.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Every event a test appends must fit its kind's payload (sessions.event_kinds).
    settings.CHECK_EVENT_PAYLOADS = True
    settings.STATIC_ROOT.mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="session", autouse=True)
def sandboxes_cleaned_up():
    """Sandboxes the tests leave live (idle session sandboxes, as in production) are
    terminated when the run ends, so nothing of a test run keeps running."""
    yield
    from snapshots.sandbox.local import LocalBackend, reap_orphans

    backend = LocalBackend(root=settings.SANDBOX_ROOT)
    for sandbox_id in backend.list_sandboxes():
        try:
            backend.attach(sandbox_id).terminate()
        except Exception:  # noqa: S112 - best effort: a gone sandbox needs nothing
            continue
    reap_orphans()


@pytest.fixture(scope="session", autouse=True)
def flush_lifts_the_audit_truncate_guard():
    """PostgreSQL refuses TRUNCATE of the audit table (approvals migration 0006), but a
    transactional test's teardown flushes every table with TRUNCATE: lift the guard for that
    statement only, as the table's owner may."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    flush = DatabaseOperations.execute_sql_flush
    trigger = "approvals_audit_no_truncate"

    def execute_sql_flush(self, sql_list):
        if any("approvals_auditentry" in sql for sql in sql_list):
            sql_list = [
                f"ALTER TABLE approvals_auditentry DISABLE TRIGGER {trigger}",
                *sql_list,
                f"ALTER TABLE approvals_auditentry ENABLE TRIGGER {trigger}",
            ]
        return flush(self, sql_list)

    DatabaseOperations.execute_sql_flush = execute_sql_flush
    yield
    DatabaseOperations.execute_sql_flush = flush


@pytest.fixture(scope="session", autouse=True)
def redis_server():
    """The suite runs against REDIS_URL when set, else against the embedded Redis (started once)."""
    if settings.EMBEDDED_REDIS:
        from inspect_web.embedded_redis import ensure_embedded_redis

        return ensure_embedded_redis(settings.EMBEDDED_REDIS_DIR).url
    return settings.REDIS_URL


@dataclass
class Team:
    repository: object
    other_repository: object
    engineer: object
    reviewer: object
    manager: object
    admin: object
    outsider: object


@pytest.fixture(scope="session")
def platform_clis() -> Path:
    """The platform's agent CLIs at their pinned versions (snapshots/agent_installs.py),
    installed once and kept between runs (CI caches the directory)."""
    from django.conf import settings

    from snapshots import agent_installs

    for runtime in agent_installs.PINNED:
        agent_installs.install(runtime)
    return Path(settings.AGENT_CLIS_DIR)


@pytest.fixture
def team(db) -> Team:
    from django.contrib.auth import get_user_model

    from accounts.models import Membership, Role
    from snapshots.models import Repository

    users = get_user_model()
    repository = Repository.objects.create(name="widgets", url="/srv/git/widgets.git")
    other = Repository.objects.create(name="gadgets", url="/srv/git/gadgets.git")
    made = {}
    for role in Role:
        user = users.objects.create_user(role.value, password="correct horse battery staple")
        Membership.objects.create(user=user, repository=repository, role=role)
        made[role.value] = user
    # The admin is also the site's superuser: the CLI acts as it unless told otherwise.
    users.objects.filter(pk=made["admin"].pk).update(is_superuser=True, is_staff=True)
    outsider = users.objects.create_user("outsider", password="correct horse battery staple")
    Membership.objects.create(user=outsider, repository=other, role=Role.ADMIN)
    return Team(repository=repository, other_repository=other, outsider=outsider, **made)


def test_database_url() -> str:
    """The URL of the database the tests run on, for processes the tests start."""
    from urllib.parse import quote

    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = quote(db["USER"] or "")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


test_database_url.__test__ = False  # a helper, not a test


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a daphne or Celery process sharing this test run's database and Redis."""
    import os

    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "SECRET_KEY"}}
    env.update(
        DJANGO_SETTINGS_MODULE="inspect_web.settings",
        DATABASE_URL=test_database_url(),
        REDIS_URL=settings.REDIS_URL,
        INSPECT_DATA_DIR=str(settings.DATA_DIR),
        INSPECT_SANDBOX_ROOT=str(settings.SANDBOX_ROOT),
        # The same key as this process, so session cookies made here are valid there.
        SECRET_KEY=settings.SECRET_KEY,
        # The same audit key, so entries the child writes verify here.
        INSPECT_AUDIT_KEY=settings.AUDIT_KEY.decode(),
        # The same sealing key, so secrets sealed here are read there and the other way round.
        INSPECT_SECRETS_KEY=settings.SECRETS_KEY,
        INSPECT_AUTO_PR="1" if settings.AUTO_PULL_REQUEST else "0",
    )
    env.update(extra)
    return env


def _stop_process(process) -> None:
    import subprocess

    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def start_celery(transactional_db):
    """Start real Celery processes (`worker` or `beat`) on the test database and Redis;
    `env`: more environment for the process (e.g. where the model gateway listens)."""
    import subprocess
    import sys
    import time

    from inspect_web.celery import app

    purge_task_queues()
    started = []

    def start(kind: str = "worker", **env: str):
        if kind == "worker":
            args = ["worker", "-P", "solo", "-l", "warning", "-n", f"test-{time.monotonic_ns()}@%h",
                    "-Q", f"celery,{settings.TURN_QUEUE}",
                    "--without-mingle", "--without-gossip"]  # fmt: skip
        else:
            args = [
                "beat",
                "-l",
                "warning",
                "-S",
                "django_celery_beat.schedulers:DatabaseScheduler",
            ]
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "inspect_web", *args],
            env=child_env(**env),
            cwd=settings.BASE_DIR,
            start_new_session=True,
        )
        started.append(process)
        if kind == "worker":
            deadline = time.monotonic() + 60
            name = args[args.index("-n") + 1].split("@")[0] + "@"
            while not any(
                key.startswith(name) for reply in app.control.ping(timeout=0.5) for key in reply
            ):
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    pytest.fail("the Celery worker did not start")
        return process

    yield start
    for process in started:
        _stop_process(process)


def purge_task_queues() -> None:
    """Drop what earlier tests queued and no worker ran: `purge()` empties only the default
    queue, and a turn left on the turns queue would run again beside this test's own."""
    from inspect_web.celery import app  # why: after Django's settings are configured

    app.control.purge()
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(settings.TURN_QUEUE)


@pytest.fixture
def celery_worker_process(start_celery):
    """A real Celery worker process on the test database and Redis."""
    return start_celery("worker")


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
def no_auto_pull_requests(settings):
    """Turns end `idle` unless a test is about pull requests (it sets AUTO_PULL_REQUEST)."""
    settings.AUTO_PULL_REQUEST = False


@pytest.fixture(autouse=True)
def private_data_dir(settings, tmp_path):
    """Mirrors and build dirs per test; the sandbox backend's own root stays shared."""
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    return settings.DATA_DIR


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
