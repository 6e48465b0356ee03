"""The pull request body gets the before/after pair, with links the code host can fetch."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from sessions.models import Session
from sessions.screenshots import screenshot_markdown
from tests.sessions.screenshots.conftest import REDDEN

pytestmark = pytest.mark.django_db


def test_the_markdown_has_a_before_after_row_per_page_with_signed_links(web_repo, create_session):
    _, summary, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    text = screenshot_markdown(Session.objects.get(pk=summary["id"]), "https://inspect.test")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == ["/", "/about.html"]
    links = re.findall(r"\((https://inspect\.test[^)]+)\)", text)
    assert len(links) == 4
    anonymous = Client()
    for link in links:
        response = anonymous.get(link.removeprefix("https://inspect.test"))
        assert response.status_code == 200
        assert b"".join(response.streaming_content).startswith(b"\x89PNG")


def test_a_link_without_or_with_a_wrong_signature_needs_a_login(web_repo, create_session):
    _, summary, _ = create_session("--prompt", "red", "--agent-command", REDDEN, "--inline")
    text = screenshot_markdown(Session.objects.get(pk=summary["id"]))
    first, second = re.findall(r"\((/sessions/[^)]+)\)", text)[:2]
    anonymous = Client()
    assert anonymous.get(first.split("?")[0]).status_code == 302
    # One image's signature does not open another.
    assert anonymous.get(second.split("?")[0] + "?" + first.split("?")[1]).status_code == 302
    assert anonymous.get(first[:-3] + "abc").status_code == 302


def test_a_session_without_screenshots_adds_nothing(ready_repo, create_session):
    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")
    assert screenshot_markdown(Session.objects.get(pk=summary["id"])) == ""
