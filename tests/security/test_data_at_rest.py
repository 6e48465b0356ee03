"""Attack: read the platform's data at rest from the host uid sandboxes and egress proxies run as.

The data directory holds the database (session keys, stored GitHub user tokens), the secret key
and the embedded Redis socket. It is created 0700 (an existing one is tightened on start), every
platform process runs under umask 077, and stored OAuth tokens are encrypted with the secrets key.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.db import connection

from snapshots.sandbox.local import LocalBackend

SANDBOX_UID = LocalBackend.__init__.__kwdefaults__["sandbox_uid"]
PLAINTEXT = "gho_16C7e42F292c6912E7710c838347Ae178B4a"


def as_sandbox_uid(*argv: str) -> subprocess.CompletedProcess:
    """Run `argv` as the host uid the sandboxes (and egress proxies) run as."""
    return subprocess.run(
        ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", *argv],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def world_traversable_parent():
    """A parent directory anyone may enter (as /srv or a home directory often is)."""
    parent = Path(tempfile.mkdtemp(prefix="inspect-data-", dir="/tmp"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def start_platform_process(data: Path, code: str) -> str:
    """A process that loads the settings as daphne, Celery and manage.py do, then runs `code`."""
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "inspect_web.settings",
        "INSPECT_DATA_DIR": str(data),
        "REDIS_URL": settings.REDIS_URL,
    }
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup()\n{code}"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_fresh_start_makes_a_data_dir_the_sandbox_uid_cannot_read(world_traversable_parent):
    data = world_traversable_parent / "data"
    out = start_platform_process(
        data,
        "import os; from django.db import connection; connection.ensure_connection()\n"
        "print(oct(os.umask(0)))",
    )
    assert out.strip() == "0o77"  # every file the process makes is its own
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "secret_key").stat().st_mode) == 0o600
    assert stat.S_IMODE((data / "db.sqlite3").stat().st_mode) == 0o600
    for name in ("secret_key", "db.sqlite3"):
        attempt = as_sandbox_uid("cat", str(data / name))
        assert attempt.returncode != 0 and "Permission denied" in attempt.stderr
    assert as_sandbox_uid("ls", str(data)).returncode != 0


def test_an_existing_world_readable_data_dir_is_tightened_on_start(world_traversable_parent):
    data = world_traversable_parent / "data"
    data.mkdir(mode=0o755)
    (data / "secret_key").write_text("x" * 60)
    (data / "db.sqlite3").write_bytes(b"")
    for path in (data, data / "secret_key", data / "db.sqlite3"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert as_sandbox_uid("cat", str(data / "secret_key")).returncode == 0  # the attack, today

    start_platform_process(data, "")
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "secret_key").stat().st_mode) == 0o600
    assert stat.S_IMODE((data / "db.sqlite3").stat().st_mode) == 0o600
    assert as_sandbox_uid("cat", str(data / "secret_key")).returncode != 0


def test_the_env_helper_creates_the_data_dir_private(world_traversable_parent, monkeypatch):
    from inspect_web import env

    monkeypatch.setenv("INSPECT_DATA_DIR", str(world_traversable_parent / "made" / "data"))
    made = env.data_dir(world_traversable_parent / "unused")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    key = env.secret_key(made)
    assert stat.S_IMODE((made / "secret_key").stat().st_mode) == 0o600
    assert env.secret_key(made) == key


@pytest.fixture
def secrets_key(settings):
    settings.SECRETS_KEY = Fernet.generate_key().decode()
    return settings.SECRETS_KEY


@pytest.mark.django_db
def test_a_stored_github_user_token_is_encrypted_in_the_database(team, secrets_key):
    from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken

    from integrations.github.codehost import _user_github_token

    app = SocialApp.objects.create(provider="github", name="GitHub", client_id="id", secret="s")
    account = SocialAccount.objects.create(user=team.engineer, provider="github", uid="583231")
    # As allauth stores it after a GitHub login (SOCIALACCOUNT_STORE_TOKENS).
    token = SocialToken(app=app, account=account, token=PLAINTEXT, token_secret="ghr_" + "r" * 36)
    token.save()
    assert token.token == PLAINTEXT  # the object in hand stays usable

    with connection.cursor() as cursor:
        cursor.execute("SELECT token, token_secret FROM socialaccount_socialtoken")
        stored, secret = cursor.fetchone()
    assert PLAINTEXT not in stored and "ghr_" not in secret
    assert _user_github_token(team.engineer) == PLAINTEXT

    # A second login updates the row (allauth saves the same object again): still encrypted.
    again = SocialToken.objects.get(pk=token.pk)
    again.token = PLAINTEXT[::-1]
    again.save()
    with connection.cursor() as cursor:
        cursor.execute("SELECT token FROM socialaccount_socialtoken")
        assert PLAINTEXT[::-1] not in cursor.fetchone()[0]
    assert _user_github_token(team.engineer) == PLAINTEXT[::-1]
