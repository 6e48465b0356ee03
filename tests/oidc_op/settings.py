"""Settings of the test OpenID provider (a separate Django project, its own SQLite file)."""

import os
from pathlib import Path

DATA = Path(os.environ["OIDC_OP_DATA"])
SECRET_KEY = "test-openid-provider-only"  # noqa: S105  (a throwaway key for a test process)
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
SITE_URL = os.environ["OIDC_OP_SITE_URL"]
ROOT_URLCONF = "tests.oidc_op.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA / "op.sqlite3"}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
LOGIN_URL = "/login/"
# Both servers listen on 127.0.0.1: cookies ignore the port, so the provider's get their own names.
SESSION_COOKIE_NAME = "op_sessionid"
CSRF_COOKIE_NAME = "op_csrftoken"
OIDC_USERINFO = "tests.oidc_op.urls.userinfo"
