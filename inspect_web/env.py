"""Typed reads of the environment.

Every setting the project reads from the environment goes through these helpers, so a missing or
malformed value stops start-up with one line that names the variable and says what to do.
"""

from __future__ import annotations

import base64
import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url


class ConfigError(Exception):
    """A setting is missing or malformed. Its message is one line a person can act on."""

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        self.problem = problem
        super().__init__(f"{variable}: {problem}")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(name, f"{raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(name, f"{raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ConfigError(name, f"{value} is below the minimum of {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(name, f"{value} is above the maximum of {maximum}")
    return value


def env_choice(name: str, choices: list[str], default: str) -> str:
    value = env_str(name, default).lower()
    if value not in choices:
        raise ConfigError(name, f"{value!r} is not one of {', '.join(choices)}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_pairs(name: str, keys: set[str]) -> dict[str, str]:
    """``key=value`` entries separated by commas, each key one of `keys`; ValueError names the
    entry that is wrong."""
    out = {}
    for entry in (e.strip() for e in env_str(name).split(",")):
        if not entry:
            continue
        key, sep, value = (part.strip() for part in entry.partition("="))
        if not sep or not value:
            raise ValueError(f"{entry!r}: expected NAME=VALUE")
        if key not in keys:
            raise ValueError(f"{entry!r}: {key!r} is not one of {', '.join(sorted(keys))}")
        out[key] = value
    return out


def env_origin(name: str) -> str:
    """An origin (`https://host[:port]`, nothing after it), normalised; "" when unset."""
    raw = env_str(name)
    if not raw:
        return ""
    parts = urlsplit(raw)
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(name, f"{raw!r} has a port that is not a number") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ConfigError(name, f"{raw!r} is not an origin like https://preview.example.org")
    if (
        parts.username
        or parts.password
        or parts.path not in {"", "/"}
        or parts.query
        or parts.fragment
    ):
        raise ConfigError(
            name, f"{raw!r} must be an origin only (scheme, host and port), with no path"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


def path(name: str, default: Path) -> Path:
    return Path(env_str(name) or default).expanduser().resolve()


# What the platform keeps in its data dir is for its own processes only: the sandboxes and
# egress proxies run as other host uids and must not read the database, keys or Redis socket.
PRIVATE_UMASK = 0o077
# Files made before the data dir was private (or copied in) are tightened on every start.
_PRIVATE_FILES = ("secret_key", "secrets_key", "db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm")


def restrict_umask() -> None:
    """Every file and directory a platform process makes is its own (umask 077)."""
    os.umask(PRIVATE_UMASK)


def data_dir(default: Path) -> Path:
    """INSPECT_DATA_DIR, created 0700 if missing (an existing one is tightened to 0700); every
    embedded default lives inside it."""
    path = Path(env_str("INSPECT_DATA_DIR") or default).expanduser().resolve()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.chmod(0o700)
        for name in _PRIVATE_FILES:
            if (path / name).exists():
                (path / name).chmod(0o600)
    except OSError as exc:
        raise ConfigError(
            "INSPECT_DATA_DIR",
            f"cannot create {path} or make it private (0700): {exc.strerror}; "
            "run as the user that owns it",
        ) from None
    if not os.access(path, os.W_OK):
        raise ConfigError("INSPECT_DATA_DIR", f"{path} is not writable by this user")
    return path


def secret_key(data: Path) -> str:
    """SECRET_KEY from the environment, else generated once and kept in the data dir (0600)."""
    value = env_str("SECRET_KEY")
    if value:
        if len(value) < 32:
            raise ConfigError(
                "SECRET_KEY", "is shorter than 32 characters; use a long random value"
            )
        return value
    path = data / "secret_key"
    if path.exists():
        path.chmod(0o600)
        return path.read_text().strip()
    value = secrets.token_urlsafe(50)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value)
    return value


def secrets_key(data: Path) -> str:
    """INSPECT_SECRETS_KEY (Fernet keys, comma-separated) from the environment, else one key
    generated once into the data dir (0600), so that secrets, provider keys and the GitHub App's
    credentials can be stored encrypted on the zero-setup default. A deployment sets its own."""
    value = env_str("INSPECT_SECRETS_KEY")
    if value:
        return value
    path = data / "secrets_key"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=data, prefix=".secrets_key.")  # mode 0600
        try:
            with os.fdopen(fd, "w") as handle:
                # A Fernet key: 32 random bytes, url-safe base64.
                handle.write(base64.urlsafe_b64encode(os.urandom(32)).decode())
            os.link(tmp, path)  # the first process to start wins; the others read its key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return path.read_text().strip()


def audit_key(data: Path) -> tuple[bytes, Path | None]:
    """INSPECT_AUDIT_KEY (the audit log's HMAC key) and the file it came from: the environment's
    value, else generated once into the data dir (0600) beside the secret key. It is kept out of
    the database so that SQL access alone cannot re-seal the audit chain."""
    value = env_str("INSPECT_AUDIT_KEY")
    if value:
        if len(value) < 32:
            raise ConfigError(
                "INSPECT_AUDIT_KEY", "is shorter than 32 characters; use a long random value"
            )
        return value.encode(), None
    path = data / "audit_key"
    if not path.exists():
        # Written whole, then linked into place: a process starting alongside never reads a
        # half-written key, and the first link wins.
        fd, tmp = tempfile.mkstemp(dir=data, prefix=".audit_key.")  # mode 0600
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(48))
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    value = path.read_text().strip()
    if len(value) < 32:
        raise ConfigError("INSPECT_AUDIT_KEY", f"{path} holds fewer than 32 characters")
    return value.encode(), path


def audit_sink() -> str:
    """INSPECT_AUDIT_SINK: "" (the default file in the data dir), an absolute file path, or
    syslog:[/socket/path | HOST:PORT]."""
    value = env_str("INSPECT_AUDIT_SINK")
    if not value:
        return ""
    if value.startswith("syslog:"):
        address = value.removeprefix("syslog:")
        if address and not address.startswith("/"):
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(
                    "INSPECT_AUDIT_SINK",
                    f"{value!r} is not syslog:, syslog:/path/to/socket or syslog:HOST:PORT",
                )
        return value
    if not Path(value).is_absolute():
        raise ConfigError(
            "INSPECT_AUDIT_SINK", f"{value!r} is not an absolute file path nor syslog:…"
        )
    return value


_DATABASE_SCHEMES = {"postgres", "postgresql", "pgsql", "sqlite"}


def database(data: Path) -> dict:
    """DATABASE_URL parsed into a Django DATABASES entry; default: SQLite in WAL mode."""
    raw = env_str("DATABASE_URL")
    if not raw:
        return _sqlite(data / "db.sqlite3")
    scheme = urlsplit(raw).scheme
    if scheme not in _DATABASE_SCHEMES:
        raise ConfigError(
            "DATABASE_URL",
            f"unsupported scheme {scheme or '(none)'!r}; "
            "use postgres://USER@HOST:5432/NAME or sqlite:////absolute/path.sqlite3",
        )
    try:
        parsed = dj_database_url.parse(raw, conn_max_age=60, conn_health_checks=True)
    except Exception as exc:  # the parser raises assorted types for garbage input
        raise ConfigError("DATABASE_URL", f"cannot be parsed ({exc})") from None
    if parsed["ENGINE"].endswith("sqlite3"):
        return _sqlite(Path(parsed["NAME"]))
    if not parsed.get("NAME"):
        raise ConfigError("DATABASE_URL", "names no database; add /NAME at the end")
    parsed["ENGINE"] = "django.db.backends.postgresql"
    parsed.setdefault("OPTIONS", {})["connect_timeout"] = 5
    return parsed


def _sqlite(path: Path) -> dict:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        # WAL lets the web process read while a worker writes; IMMEDIATE avoids upgrade deadlocks.
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
        # A file, not memory: tests start daphne and Celery workers that must share it.
        "TEST": {"NAME": str(path.with_name(f"test-{path.name}"))},
    }


_REDIS_SCHEMES = {"redis", "rediss", "unix"}


def redis_url(data: Path) -> str:
    """REDIS_URL; default: the embedded Redis on a unix socket inside the data dir."""
    raw = env_str("REDIS_URL")
    if not raw:
        return f"unix://{data / 'redis.sock'}"
    parts = urlsplit(raw)
    if parts.scheme not in _REDIS_SCHEMES:
        raise ConfigError(
            "REDIS_URL",
            f"unsupported scheme {parts.scheme or '(none)'!r}; "
            "use redis://HOST:6379/0, rediss://... or unix:///path/to/redis.sock",
        )
    if parts.scheme == "unix" and not parts.path:
        raise ConfigError("REDIS_URL", "a unix:// URL needs a socket path")
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError("REDIS_URL", "names no host; use redis://HOST:6379/0")
    try:
        parts.port  # noqa: B018 - raises ValueError for a non-numeric port
    except ValueError:
        raise ConfigError("REDIS_URL", "has a port that is not a number") from None
    return raw


_BROKER_SCHEMES = {"redis", "rediss", "redis+socket", "amqp", "amqps", "pyamqp"}


def broker_url(redis: str) -> str:
    """CELERY_BROKER_URL; default: the same Redis (RabbitMQ's amqp:// works too)."""
    raw = env_str("CELERY_BROKER_URL")
    if not raw:
        if redis.startswith("unix://"):
            return "redis+socket://" + redis.removeprefix("unix://")
        return redis
    scheme = urlsplit(raw).scheme
    if scheme not in _BROKER_SCHEMES:
        raise ConfigError(
            "CELERY_BROKER_URL",
            f"unsupported scheme {scheme or '(none)'!r}; use redis://HOST:6379/0 or "
            "amqp://USER:PASSWORD@HOST:5672//",
        )
    return raw
