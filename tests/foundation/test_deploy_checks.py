"""`check --deploy` stays clean with production-like settings; migrations match the models."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "INSPECT_DATA_DIR"}}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings():
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        INSPECT_HTTPS="1",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="inspect.example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_migrations_are_committed_for_every_model_change():
    result = manage("makemigrations", "--check", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
