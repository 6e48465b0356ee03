"""Settings, read from the environment. Every variable is documented in docs/configuration.md."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from inspect_web import env
from inspect_web.pricing import parse_prices
from inspect_web.runtimes import AGENT_RUNTIMES, CLI_RUNTIMES

BASE_DIR = Path(__file__).resolve().parent.parent
# Before anything is written: web, workers, beat and manage.py all load these settings.
env.restrict_umask()
DATA_DIR = env.data_dir(BASE_DIR / "var")

SECRET_KEY = env.secret_key(DATA_DIR)
DEBUG = env.env_bool("DEBUG", False)
# Each appended event's payload is checked against its kind (sessions.event_kinds); the tests
# turn it on too.
CHECK_EVENT_PAYLOADS = DEBUG
ALLOWED_HOSTS = env.env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.env_list("CSRF_TRUSTED_ORIGINS", [])
# A separate origin that serves only the live preview (recommended in production): the
# agent-written application then never runs on the dashboard's origin at all.
PREVIEW_ORIGIN = env.env_origin("INSPECT_PREVIEW_ORIGIN")
if PREVIEW_ORIGIN and "*" not in ALLOWED_HOSTS:
    _preview_host = urlsplit(PREVIEW_ORIGIN).hostname or ""
    ALLOWED_HOSTS.append(f"[{_preview_host}]" if ":" in _preview_host else _preview_host)
PREVIEW_COOKIE_SECONDS = env.env_int("INSPECT_PREVIEW_COOKIE_SECONDS", 8 * 3600, minimum=60)

# Behind TLS (a proxy terminating HTTPS): secure cookies, HSTS and redirects.
HTTPS = env.env_bool("INSPECT_HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

INSTALLED_APPS = [
    "daphne",  # first, so runserver and the ASGI stack are daphne's
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "django_celery_beat",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.github",
    "allauth.socialaccount.providers.openid_connect",
    "inspect_web",
    "accounts",
    "snapshots",
    "sessions.apps.SessionsConfig",
    "approvals",
    "rest_framework",
    "drf_spectacular",
    "api",
    "automations",
    "integrations",
    "gateway",
    "metrics",
    "settings_area",
]

MIDDLEWARE = [
    "sessions.preview_origin.PreviewOriginMiddleware",  # the preview origin serves nothing else
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "approvals.middleware.AuditActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "inspect_web.urls"
ASGI_APPLICATION = "inspect_web.asgi.application"
WSGI_APPLICATION = "inspect_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "inspect_web.context.navigation",
                "settings_area.context.settings_link",
                "settings_area.context.settings_sections",
            ],
        },
    },
]

DATABASES = {"default": env.database(DATA_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.redis_url(DATA_DIR)
EMBEDDED_REDIS = not env.env_str("REDIS_URL")
# Where the embedded Redis's socket is (REDIS_URL's default), fixed at start-up.
EMBEDDED_REDIS_DIR = DATA_DIR

# The channel layer only rings the doorbell ("events up to seq N exist"); viewers read the Event
# table, so a lost message costs latency, never an event. Pub/sub, chosen on measurements
# (bench/stream.py, 50 viewers, 2,000 events/s, PostgreSQL, 2 cores): p99 93-96 ms vs
# 327-538 ms for the core layer, daphne CPU 21% vs 27-33%. The core layer's group_send runs a
# Lua fan-out into every member's list, checking each one's capacity (default 100; a full
# channel silently drops the message), and every consumer then pops its copy with its own
# round trip; pub/sub is one PUBLISH and one read per process. With a Redis restart, pub/sub
# reconnects and resubscribes while viewers stay connected; the core layer crashes every
# consumer (close 1011) and loses group memberships. Pub/sub queues are unbounded, but each
# consumer drains its queue at once (a notification is a number).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "inspect",
    }
}

CELERY_BROKER_URL = env.broker_url(REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 4 * 3600}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Turns have their own queue and worker (threads: a turn mostly waits on its sandbox), so a
# turn never waits behind a snapshot build or a pool fill (docs/performance.md, "Start").
TURN_QUEUE = "turns"
CELERY_TASK_ROUTES = {"sessions.tasks.run_session": {"queue": TURN_QUEUE}}
CELERY_TIMEZONE = "UTC"

# Sandboxes: the local backend (bubblewrap or gVisor) unless Modal is chosen and configured.
SANDBOX_BACKEND = env.env_choice("INSPECT_SANDBOX_BACKEND", ["local", "modal"], "local")
SANDBOX_RUNTIME = env.env_choice("INSPECT_SANDBOX_RUNTIME", ["bwrap", "runsc"], "bwrap")
SANDBOX_ROOT = env.path("INSPECT_SANDBOX_ROOT", DATA_DIR / "sandbox")
# The platform's agent CLIs (snapshots/agent_installs.py): outside the data dir so an install
# is shared by every checkout and kept between runs; read-only in every sandbox.
AGENT_CLIS_DIR = env.path("INSPECT_AGENT_CLIS_DIR", Path("/opt/inspect-web/agent-clis"))
# Disk quota of one local sandbox (workspace changes, /tmp, /var/tmp together); 0 turns it off.
SANDBOX_DISK_BYTES = env.env_int("INSPECT_SANDBOX_DISK_BYTES", 8 * 1024**3, minimum=0)
MODAL_TOKEN_ID = env.env_str("MODAL_TOKEN_ID")
MODAL_TOKEN_SECRET = env.env_str("MODAL_TOKEN_SECRET")
MODAL_APP_NAME = env.env_str("INSPECT_MODAL_APP", "inspect-web")
if SANDBOX_BACKEND == "modal" and not (MODAL_TOKEN_ID and MODAL_TOKEN_SECRET):
    raise env.ConfigError(
        "INSPECT_SANDBOX_BACKEND", "'modal' needs MODAL_TOKEN_ID and MODAL_TOKEN_SECRET to be set"
    )
# Egress of local sandboxes (snapshots/sandbox/netns.py): private addresses the operator lets
# sandboxes reach, as name=ADDRESS[/PREFIX][:PORTS] entries ("mirror=10.1.2.3:443,
# models=10.8.0.0/24:8000-8100"; IPv6 in brackets), and networks to refuse on top of loopback,
# RFC 1918, CGNAT, link-local/metadata, ULA and the host's own addresses. Kept as written: their
# syntax is the sandbox's, so snapshots/egress_settings.py parses them, at start-up too, where a
# bad entry stops the process naming its variable.
EGRESS_EXCEPTIONS_SPEC = env.env_str("INSPECT_EGRESS_ALLOW_PRIVATE")
EGRESS_DENY_SPEC = env.env_str("INSPECT_EGRESS_DENY")
# Names the allowlist proxy resolves itself ("models.internal=10.8.0.5"): split DNS.
EGRESS_HOSTS_SPEC = env.env_str("INSPECT_EGRESS_HOSTS")
SNAPSHOT_KEEP = env.env_int("INSPECT_SNAPSHOT_KEEP", 3, minimum=1)
SNAPSHOT_SETUP_TIMEOUT = env.env_int("INSPECT_SETUP_TIMEOUT", 1800, minimum=10)
PREWARM_SECONDS = env.env_int("INSPECT_PREWARM_SECONDS", 120, minimum=5)
SANDBOX_IDLE_SECONDS = env.env_int("INSPECT_SANDBOX_IDLE_SECONDS", 900, minimum=30)
# Warm pools (sessions/warm_pool.py): restored, synced, idle sandboxes per repository, sized
# from its sessions by hour of day; at most this many on the site (0: no pools).
POOL_MAX_SANDBOXES = env.env_int("INSPECT_POOL_MAX_SANDBOXES", 8, minimum=0)
POOL_MAX_PER_REPOSITORY = env.env_int("INSPECT_POOL_MAX_PER_REPOSITORY", 4, minimum=0)
POOL_MIN_PER_REPOSITORY = env.env_int("INSPECT_POOL_MIN_PER_REPOSITORY", 0, minimum=0)
POOL_HISTORY_DAYS = env.env_int("INSPECT_POOL_HISTORY_DAYS", 14, minimum=1)
POOL_MIN_FREE_MB = env.env_int("INSPECT_POOL_MIN_FREE_MB", 1024, minimum=0)
# A web terminal closes after this long without input (its shell with it).
TERMINAL_IDLE_SECONDS = env.env_int("INSPECT_TERMINAL_IDLE_SECONDS", 600, minimum=1)
# Open websockets and event streams re-check their user's membership and role this often (and at
# once when a membership changes); at most 30 s, so a removed member is never left watching longer.
WS_RECHECK_SECONDS = env.env_int("INSPECT_WS_RECHECK_SECONDS", 30, minimum=1, maximum=30)


# Agent runtimes
# The built-in agent's model API (OpenAI-compatible, or Anthropic's Messages API), the CLI agents'
# keys, and per-turn limits. Keys stay on the worker: never in a sandbox, scrubbed from events.
def _env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = env.env_str(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise env.ConfigError(name, f"{raw!r} is not a number") from None
    if value < minimum:
        raise env.ConfigError(name, f"{value} is below the minimum of {minimum}")
    return value


DEFAULT_AGENT = env.env_choice("INSPECT_DEFAULT_AGENT", list(AGENT_RUNTIMES), "builtin")
LLM_PROVIDER = env.env_choice("INSPECT_LLM_PROVIDER", ["auto", "openai", "anthropic"], "auto")
LLM_BASE_URL = env.env_str("INSPECT_LLM_BASE_URL", "https://api.openai.com/v1").rstrip("/")
LLM_API_KEY = env.env_str("INSPECT_LLM_API_KEY")
LLM_MODEL = env.env_str("INSPECT_LLM_MODEL")
# Each CLI agent's model ("claude-code=claude-sonnet-4-5,codex=gpt-5-codex"); a session's
# --model overrides it; a CLI with none uses its own default.
try:
    AGENT_MODELS = env.env_pairs("INSPECT_AGENT_MODELS", set(CLI_RUNTIMES))
except ValueError as exc:
    raise env.ConfigError("INSPECT_AGENT_MODELS", str(exc)) from None
ANTHROPIC_API_KEY = env.env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env.env_str("ANTHROPIC_BASE_URL", "https://api.anthropic.com").rstrip("/")
LLM_TIMEOUT = env.env_int("INSPECT_LLM_TIMEOUT", 120, minimum=5)
LLM_RETRIES = env.env_int("INSPECT_LLM_RETRIES", 4, minimum=0, maximum=10)
# The built-in agent's model's context window: its conversation is summarised when near it.
LLM_CONTEXT_TOKENS = env.env_int("INSPECT_LLM_CONTEXT_TOKENS", 128_000, minimum=1000)
try:
    LLM_PRICES = parse_prices(env.env_str("INSPECT_LLM_PRICES"))
except ValueError as exc:
    raise env.ConfigError("INSPECT_LLM_PRICES", str(exc)) from None
AGENT_MAX_STEPS = env.env_int("INSPECT_AGENT_MAX_STEPS", 50, minimum=1)
AGENT_MAX_TOKENS = env.env_int("INSPECT_AGENT_MAX_TOKENS", 500_000, minimum=1000)
AGENT_MAX_COST_USD = _env_float("INSPECT_AGENT_MAX_COST_USD", 5.0)
AGENT_MAX_WALL_SECONDS = env.env_int("INSPECT_AGENT_MAX_WALL_SECONDS", 1800, minimum=30)
AGENT_COMMAND_TIMEOUT = env.env_int("INSPECT_AGENT_COMMAND_TIMEOUT", 600, minimum=5)
AGENT_MALFORMED_RETRIES = env.env_int("INSPECT_AGENT_MALFORMED_RETRIES", 3, minimum=0)
AGENT_CHILD_DEPTH = env.env_int("INSPECT_AGENT_CHILD_DEPTH", 1, minimum=0)
AGENT_CHILDREN_PER_REPOSITORY = env.env_int("INSPECT_AGENT_CHILDREN_PER_REPOSITORY", 5, minimum=0)
# End of agent runtimes

# The model gateway (docs/model-gateway.md): every runtime's model calls go through it with a
# per-turn token; the provider keys above stay in the platform.
GATEWAY_HOST = env.env_str("INSPECT_GATEWAY_HOST", "127.0.0.1")
GATEWAY_PORT = env.env_int("INSPECT_GATEWAY_PORT", 8765, minimum=1, maximum=65535)
# Local sandboxes reach the gateway through this socket (carried in by each sandbox's door).
GATEWAY_SOCKET = env.env_str("INSPECT_GATEWAY_SOCKET", str(DATA_DIR / "gateway" / "gateway.sock"))
# How Modal sandboxes reach the gateway (a public https URL routed to GATEWAY_PORT); empty:
# Modal sessions cannot call a model.
GATEWAY_PUBLIC_URL = env.env_str("INSPECT_GATEWAY_PUBLIC_URL").rstrip("/")
# Full request and response bodies are kept this many days (hashes and sizes forever).
GATEWAY_BODY_DAYS = env.env_int("INSPECT_GATEWAY_BODY_DAYS", 30, minimum=0)
# How long a model request waits, paused, for an admin to raise the budget it would pass.
BUDGET_PAUSE_SECONDS = env.env_int("INSPECT_BUDGET_PAUSE_SECONDS", 600, minimum=0)
# What a sandbox minute costs, counted into the cost per merged pull request.
SANDBOX_USD_PER_MINUTE = _env_float("INSPECT_SANDBOX_USD_PER_MINUTE", 0.0)

# Repository secrets and every secret setting are Fernet-encrypted with this key
# (comma-separated: the first encrypts, all decrypt, for rotation); unset, one is generated
# into the data dir.
SECRETS_KEY = env.secrets_key(DATA_DIR)

# The audit log's HMAC key, kept outside the database (approvals.audit); and where each new
# chain head is also written: a file (default <data dir>/audit-head.log) or "syslog:[address]".
AUDIT_KEY, AUDIT_KEY_FILE = env.audit_key(DATA_DIR)
AUDIT_SINK = env.audit_sink()

CELERY_BEAT_SCHEDULE = {
    "refresh-due-snapshots": {
        "task": "snapshots.tasks.refresh_due_snapshots",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "collect-snapshot-garbage": {
        "task": "snapshots.tasks.collect_snapshot_garbage",
        "schedule": 600.0,
        "options": {"expires": 550},
    },
    "watch-sessions": {
        "task": "sessions.tasks.watch_sessions",
        "schedule": 5.0,
        "options": {"expires": 5},
    },
    "reap-idle-sandboxes": {
        "task": "sessions.tasks.reap_idle_sandboxes",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "expire-approvals": {
        "task": "approvals.tasks.expire_approvals",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "fill-sandbox-pools": {
        "task": "sessions.tasks.fill_sandbox_pools",
        "schedule": 15.0,
        "options": {"expires": 14},
    },
    "reap-prewarmed-sandboxes": {
        "task": "snapshots.tasks.reap_prewarmed_sandboxes",
        "schedule": 30.0,
        "options": {"expires": 25},
    },
    "refresh-metrics-rollups": {
        "task": "metrics.tasks.refresh_rollups",
        "schedule": 300.0,
        "options": {"expires": 250},
    },
    "delete-expired-model-bodies": {
        "task": "gateway.tasks.delete_expired_model_bodies",
        "schedule": 3600.0,
        "options": {"expires": 3500},
    },
}

# The REST API (api/): token or browser-session auth, JSON only, one error shape, OpenAPI 3.0.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "api.errors.ApiSchema",
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Inspect Web API",
    "DESCRIPTION": "Start, follow and steer background coding-agent sessions.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/",
    "ENUM_NAME_OVERRIDES": {
        "SessionState": "sessions.models.State",
        "PromptState": "sessions.models.Prompt.State",
        "SnapshotState": "snapshots.models.Snapshot.State",
        "ApprovalState": "approvals.models.ApprovalRequest.State",
    },
}

# Absolute links in messages sent elsewhere (Slack).
PUBLIC_URL = env.env_str("INSPECT_PUBLIC_URL", "http://localhost:8000").rstrip("/")

# Slack (integrations/): signing secret for incoming requests, bot token for the Web API.
SLACK_SIGNING_SECRET = env.env_str("SLACK_SIGNING_SECRET")
SLACK_BOT_TOKEN = env.env_str("SLACK_BOT_TOKEN")
SLACK_API_URL = env.env_str("SLACK_API_URL", "https://slack.com/api/")
SLACK_LLM_ROUTING = env.env_bool("INSPECT_SLACK_LLM_ROUTING", False)
SLACK_AGENT = env.env_str("INSPECT_SLACK_AGENT", "")  # empty: INSPECT_DEFAULT_AGENT
SLACK_AGENT_COMMAND = env.env_str("INSPECT_SLACK_AGENT_COMMAND", "")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # First: refuses every password check while local passwords are off (login page, /admin/).
    "accounts.identity.PasswordsOffBackend",
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]

LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"
ACCOUNT_LOGOUT_REDIRECT_URL = "account_login"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "email", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_ADAPTER = "accounts.identity.AccountAdapter"
SOCIALACCOUNT_ADAPTER = "accounts.identity.SocialAccountAdapter"
# Self-hosted: accounts are created by an admin unless signup is opened explicitly.
OPEN_SIGNUP = env.env_bool("INSPECT_OPEN_SIGNUP", False)

GITHUB_OAUTH_CLIENT_ID = env.env_str("GITHUB_OAUTH_CLIENT_ID")
GITHUB_OAUTH_CLIENT_SECRET = env.env_str("GITHUB_OAUTH_CLIENT_SECRET")
if bool(GITHUB_OAUTH_CLIENT_ID) != bool(GITHUB_OAUTH_CLIENT_SECRET):
    raise env.ConfigError(
        "GITHUB_OAUTH_CLIENT_SECRET" if GITHUB_OAUTH_CLIENT_ID else "GITHUB_OAUTH_CLIENT_ID",
        "GitHub login needs both GITHUB_OAUTH_CLIENT_ID and GITHUB_OAUTH_CLIENT_SECRET",
    )
# Single sign-on with OpenID Connect; each may also be set on Settings › Sign-in (these win).
OIDC_NAME = env.env_str("INSPECT_OIDC_NAME")
OIDC_SERVER_URL = env.env_str("INSPECT_OIDC_SERVER_URL")
OIDC_CLIENT_ID = env.env_str("INSPECT_OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env.env_str("INSPECT_OIDC_CLIENT_SECRET")
SSO_ALLOWED_DOMAINS = env.env_str("INSPECT_SSO_ALLOWED_DOMAINS")
SSO_DEFAULT_ROLE = env.env_str("INSPECT_SSO_DEFAULT_ROLE")
SSO_DEFAULT_REPOSITORIES = env.env_str("INSPECT_SSO_DEFAULT_REPOSITORIES")
LOCAL_PASSWORDS_OFF = "1" if env.env_bool("INSPECT_LOCAL_PASSWORDS_OFF", False) else ""
# Break-glass while local passwords are off: "superuser" lets active superusers (the `admin`
# that ensure_admin creates) still log in with a password.
LOCAL_LOGIN = env.env_str("INSPECT_LOCAL_LOGIN")
if LOCAL_LOGIN not in ("", "superuser"):
    raise env.ConfigError("INSPECT_LOCAL_LOGIN", "is either unset or 'superuser'")
# The apps themselves (client ids and secrets) come from accounts.identity's adapter, which reads
# the environment above or the settings page at run time.
SOCIALACCOUNT_PROVIDERS: dict = {
    # `repo` lets PRs be opened as the prompting user (so they cannot approve their own).
    "github": {"SCOPE": ["read:user", "user:email", "repo"]},
    "openid_connect": {"OAUTH_PKCE_ENABLED": True},
}

# The PR-opening token of a user who logged in with GitHub: stored only encrypted, so only when
# INSPECT_SECRETS_KEY is set (approvals.oauth_tokens).
SOCIALACCOUNT_STORE_TOKENS = bool(SECRETS_KEY)

# The GitHub App the worker acts as for clone, push, PRs and merges (repositories linked with
# `inspect github link`). The private key: PEM text, or a path to the PEM file.
GITHUB_APP_ID = env.env_str("GITHUB_APP_ID")
GITHUB_APP_PRIVATE_KEY = env.env_str("GITHUB_APP_PRIVATE_KEY")
if GITHUB_APP_PRIVATE_KEY and not GITHUB_APP_PRIVATE_KEY.lstrip().startswith("-----BEGIN"):
    try:
        GITHUB_APP_PRIVATE_KEY = Path(GITHUB_APP_PRIVATE_KEY).read_text()
    except OSError as exc:
        raise env.ConfigError(
            "GITHUB_APP_PRIVATE_KEY", f"is neither a PEM key nor a readable file ({exc})"
        ) from None
GITHUB_APP_SLUG = env.env_str("GITHUB_APP_SLUG", "inspect-web")  # @mention name in comments
GITHUB_API_URL = env.env_str("GITHUB_API_URL", "https://api.github.com").rstrip("/")
# GitHub's web address (the App manifest flow, installation pages); GHES: https://HOST.
GITHUB_WEB_URL = env.env_str("GITHUB_WEB_URL", "https://github.com").rstrip("/")
GITHUB_WEBHOOK_SECRET = env.env_str("GITHUB_WEBHOOK_SECRET")
# Open (then update) a pull request after every turn that changed something.
AUTO_PULL_REQUEST = env.env_bool("INSPECT_AUTO_PR", True)

EMAIL_BACKEND = env.env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
MEDIA_URL = "media/"
MEDIA_ROOT = DATA_DIR / "media"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # No manifest: pages render before (and without) collectstatic, e.g. in tests.
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
    },
}

LOG_LEVEL = env.env_str("LOG_LEVEL", "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
