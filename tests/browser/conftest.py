"""Real-browser fixtures: Debian's Chromium driven by Playwright against a live daphne and a real
Celery worker, on the test database."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from tests.sessions.review_fixtures import reviewed_change  # noqa: F401
from tests.sessions.stream.conftest import running_daphne

# Playwright's sync API runs an event loop in this thread; the test's own ORM calls are sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip
SCREENSHOTS = settings.BASE_DIR / "var" / "test-artifacts" / "screenshots"


@pytest.fixture(scope="module")
def browser():
    """Per module: Playwright's sync API holds an event loop open, which must be gone before
    the async tests that follow run."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory):
    """collectstatic once, as `make run` does (whitenoise serves STATIC_ROOT)."""
    from django.core.management import call_command
    from django.test import override_settings

    root = tmp_path_factory.mktemp("static")
    with override_settings(STATIC_ROOT=root):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


@pytest.fixture
def live_server_url(transactional_db, tmp_path, collected_static):
    (tmp_path / "static").symlink_to(collected_static, target_is_directory=True)
    with running_daphne(tmp_path / "daphne.log") as server:
        yield server.http_url.rstrip("/"), server


@pytest.fixture
def login(browser, live_server_url):
    """A fresh browser context logged in as `user` (the session cookie, as after a login)."""
    from django.test import Client

    base, _ = live_server_url
    contexts = []

    def open_as(user):
        client = Client()
        client.force_login(user)
        context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
        name = settings.SESSION_COOKIE_NAME
        context.add_cookies([{"name": name, "value": client.cookies[name].value, "url": base}])
        contexts.append(context)
        return context.new_page()

    yield open_as
    for context in contexts:
        context.close()


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
