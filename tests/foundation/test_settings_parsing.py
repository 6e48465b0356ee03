import subprocess
import sys
from pathlib import Path

import pytest

from inspect_web import env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in ["DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY", "DEBUG"]:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_defaults_are_sqlite_in_wal_mode_and_embedded_redis(clean_env):
    database = env.database(clean_env)
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["NAME"] == str(clean_env / "db.sqlite3")
    assert "journal_mode=WAL" in database["OPTIONS"]["init_command"]
    assert env.redis_url(clean_env) == f"unix://{clean_env / 'redis.sock'}"
    assert env.broker_url(env.redis_url(clean_env)) == f"redis+socket://{clean_env / 'redis.sock'}"


def test_postgres_url_is_parsed(clean_env, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://inspect:pw@db.internal:5433/inspect")
    database = env.database(clean_env)
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["HOST"], database["PORT"], database["NAME"]) == (
        "db.internal",
        5433,
        "inspect",
    )


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("mysql://root@localhost/app", "unsupported scheme 'mysql'"),
        ("not a url", "unsupported scheme '(none)'"),
        ("postgres://user@host:5432", "names no database"),
    ],
)
def test_bad_database_url_names_the_variable(clean_env, monkeypatch, value, fragment):
    monkeypatch.setenv("DATABASE_URL", value)
    with pytest.raises(env.ConfigError) as raised:
        env.database(clean_env)
    assert str(raised.value).startswith("DATABASE_URL: ")
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("http://cache:6379", "unsupported scheme 'http'"),
        ("redis://", "names no host"),
        ("redis://cache:port/0", "port that is not a number"),
    ],
)
def test_bad_redis_url_names_the_variable(clean_env, monkeypatch, value, fragment):
    monkeypatch.setenv("REDIS_URL", value)
    with pytest.raises(env.ConfigError) as raised:
        env.redis_url(clean_env)
    assert str(raised.value).startswith("REDIS_URL: ")
    assert fragment in str(raised.value)


def test_rabbitmq_broker_is_accepted_and_nonsense_refused(clean_env, monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
    assert env.broker_url("redis://x:6379/0") == "amqp://guest:guest@127.0.0.1:5672//"
    monkeypatch.setenv("CELERY_BROKER_URL", "kafka://x")
    with pytest.raises(env.ConfigError, match="^CELERY_BROKER_URL: unsupported scheme"):
        env.broker_url("redis://x:6379/0")


def test_booleans_and_numbers_are_strict(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(env.ConfigError, match="^DEBUG: 'maybe' is not a boolean"):
        env.env_bool("DEBUG")
    monkeypatch.setenv("INSPECT_PORT", "eighty")
    with pytest.raises(env.ConfigError, match="^INSPECT_PORT: 'eighty' is not a whole number"):
        env.env_int("INSPECT_PORT", 8000)


def test_the_preview_origin_is_an_origin_and_nothing_more(monkeypatch):
    monkeypatch.setenv("INSPECT_PREVIEW_ORIGIN", "HTTPS://Preview.Example.org:8443/")
    assert env.env_origin("INSPECT_PREVIEW_ORIGIN") == "https://preview.example.org:8443"
    for bad in ("preview.example.org", "https://preview.example.org/app", "ftp://x.example",
                "https://u:p@preview.example.org", "https://preview.example.org:port"):  # fmt: skip
        monkeypatch.setenv("INSPECT_PREVIEW_ORIGIN", bad)
        with pytest.raises(env.ConfigError, match="^INSPECT_PREVIEW_ORIGIN: "):
            env.env_origin("INSPECT_PREVIEW_ORIGIN")


def test_secret_key_is_generated_once_and_kept_private(clean_env):
    first = env.secret_key(clean_env)
    assert len(first) >= 50
    assert env.secret_key(clean_env) == first
    assert (clean_env / "secret_key").stat().st_mode & 0o777 == 0o600


def test_short_secret_key_is_refused(clean_env, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "hunter2")
    with pytest.raises(env.ConfigError, match="^SECRET_KEY: is shorter than 32"):
        env.secret_key(clean_env)


def test_manage_py_reports_a_bad_setting_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "INSPECT_DATA_DIR": str(tmp_path),
            "DATABASE_URL": "mysql://x",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "inspect-web: configuration error: DATABASE_URL: unsupported scheme 'mysql'; "
        "use postgres://USER@HOST:5432/NAME or sqlite:////absolute/path.sqlite3"
    ]


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("INSPECT_EGRESS_ALLOW_PRIVATE", "mirror=10.1.2.300:443", "'10.1.2.300' is not an address"),
        ("INSPECT_EGRESS_ALLOW_PRIVATE", "10.1.2.3:443", "expected name=ADDRESS"),
        ("INSPECT_EGRESS_ALLOW_PRIVATE", "mirror=10.1.2.3:https", "'https' is not a port"),
        ("INSPECT_EGRESS_DENY", "203.0.113.0/24,nonsense", "'nonsense' is not an address"),
        ("INSPECT_EGRESS_HOSTS", "models.internal=10.8.0.x", "'10.8.0.x' is not an IP address"),
        ("INSPECT_EGRESS_HOSTS", "10.8.0.5", "expected host.name=ADDRESS"),
        ("INSPECT_AGENT_MODELS", "claude-code", "expected NAME=VALUE"),
        ("INSPECT_AGENT_MODELS", "gemini=flash", "'gemini' is not one of claude-code, codex"),
    ],
)
def test_a_bad_egress_entry_stops_start_up_naming_the_variable(tmp_path, variable, value, fragment):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "INSPECT_DATA_DIR": str(tmp_path), variable: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"inspect-web: configuration error: {variable}: ") and fragment in line


def test_egress_exceptions_parse_addresses_networks_and_ports():
    from snapshots.sandbox.netns import parse_exceptions

    mirror, models, v6 = parse_exceptions(
        "mirror=10.1.2.3:443, models=10.8.0.0/24:8000-8100+443, six=[fd00::5]/128"
    )
    assert mirror.allows("10.1.2.3", 443) and not mirror.allows("10.1.2.3", 80)
    assert models.allows("10.8.0.77", 8050) and models.allows("10.8.0.1", 443)
    assert not models.allows("10.8.1.1", 443)
    assert v6.allows("fd00::5", 22) and v6.describe() == "six: fd00::5/128 (any port)"
    assert parse_exceptions(mirror.spec()) == (mirror,)
