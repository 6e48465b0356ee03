"""The pull request body shows the newest turn's before/after screenshots."""

import pytest

from sessions.models import Session
from tests.screenshots.conftest import REDDEN

pytestmark = pytest.mark.django_db


def test_the_pull_request_body_has_the_before_after_table(web_repo, create_session, settings):
    from sessions.pulls import pr_body

    settings.PUBLIC_URL = "https://inspect.test"
    _, summary, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    body = pr_body(Session.objects.get(pk=summary["id"]))
    assert "## Screenshots\n\n| Page | Before | After |" in body
    assert "| `/` | ![before](https://inspect.test/sessions/" in body
