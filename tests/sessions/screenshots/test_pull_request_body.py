"""The pull request body: what changed and why, the risk, verification, the newest turn's
before/after screenshots, the task and a link to the session."""

import pytest

from sessions.models import Session
from tests.sessions.screenshots.conftest import REDDEN

pytestmark = pytest.mark.django_db


def test_the_pull_request_body_has_the_before_after_table(web_repo, create_session, settings):
    from sessions.pulls import pr_body

    settings.PUBLIC_URL = "https://inspect.test"
    _, summary, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    body = pr_body(Session.objects.get(pk=summary["id"]))
    assert "## Screenshots\n\n| Page | Before | After |" in body
    assert "| `/` | ![before](https://inspect.test/sessions/" in body


def test_the_published_pull_request_holds_task_summary_checks_screenshots_and_link(
    web_repo, create_session, inspect_cli, settings
):
    from sessions.models import PullRequest
    from tests.sessions.screenshots.conftest import RECIPE

    settings.AUTO_PULL_REQUEST = True
    settings.PUBLIC_URL = "https://inspect.test"
    web_repo.upstream.commit(
        {".inspect/environment.toml": RECIPE + 'verify = ["grep -q Goodbye index.html"]\n'}
    )
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    says = """echo '{"kind": "message", "data": {"text": "The page is red now."}}'"""
    agent = f"{REDDEN} && {says}"
    code, summary, err = create_session(
        "--prompt", "make it red", "--agent-command", agent, "--inline", "--as", "engineer"
    )
    assert code == 0, err
    body = PullRequest.objects.get(session_id=summary["id"]).body
    # What changed and why first, then the risk and the evidence, then the task in full.
    parts = [
        "## What changed and why\n\nThe page is red now.\n\nAsked for: make it red\n",
        "## Risk\n\n- 1 file, +",
        "## Verification\n\n- ✅ `grep -q Goodbye index.html`",
        "## Screenshots\n\n| Page | Before | After |",
        "## Task\n\nmake it red\n",
        f"Session: https://inspect.test/sessions/{summary['id']}/",
    ]
    assert all(part in body for part in parts), body
    assert [body.index(part) for part in parts] == sorted(body.index(part) for part in parts)
