"""Every form control on the main pages has a label, and no page or static file loads anything
from another host (htmx and every other front-end file is served from static/)."""

import re
from html.parser import HTMLParser

import pytest
from django.conf import settings
from django.urls import reverse

from sessions.models import Session

pytestmark = pytest.mark.django_db

PAGES = [
    "home",
    "sessions:list",
    "sessions:new",
    "snapshots:list",
    "approvals:inbox",
    "approvals:audit",
    "metrics",
    "automations:list",
    "api-tokens",
]
UNLABELLED_TYPES = {"hidden", "submit", "button", "reset", "image"}


class Controls(HTMLParser):
    """Collects form controls, the ids that labels point at, and controls inside a <label>."""

    def __init__(self) -> None:
        super().__init__()
        self.controls: list[dict] = []
        self.label_for: set[str] = set()
        self.open_labels = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "label":
            self.open_labels += 1
            if attrs.get("for"):
                self.label_for.add(attrs["for"])
        elif tag in {"input", "select", "textarea"}:
            if tag == "input" and attrs.get("type", "text") in UNLABELLED_TYPES:
                return
            self.controls.append({**attrs, "tag": tag, "wrapped": self.open_labels > 0})

    def handle_endtag(self, tag):
        if tag == "label" and self.open_labels:
            self.open_labels -= 1


def unlabelled(html: str) -> list[str]:
    parser = Controls()
    parser.feed(html)
    return [
        f"<{c['tag']} name={c.get('name')!r} id={c.get('id')!r}>"
        for c in parser.controls
        if not (
            c["wrapped"]
            or c.get("aria-label")
            or c.get("aria-labelledby")
            or (c.get("id") and c["id"] in parser.label_for)
        )
    ]


def page_urls(team) -> list[str]:
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix login", branch="main"
    )
    return [reverse(name) for name in PAGES] + [session.get_absolute_url()]


def test_every_form_control_on_the_main_pages_is_labelled(client, team):
    client.force_login(team.admin)
    for url in page_urls(team):
        response = client.get(url)
        assert response.status_code == 200, url
        assert unlabelled(response.content.decode()) == [], url


def test_the_session_page_controls_are_reachable_by_keyboard(client, team):
    """Buttons and links, not clickable divs; the scrolling log takes focus to scroll by keys."""
    client.force_login(team.engineer)
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix login", branch="main"
    )
    page = client.get(session.get_absolute_url()).content.decode()
    assert re.search(r'<div id="log" class="log-box" tabindex="0"', page)
    assert '<button type="button" id="jump-live"' in page
    assert "onclick=" not in page
    assert not re.search(r"<(div|span|li)[^>]*\bhx-(get|post)=", page)


def test_no_page_loads_anything_from_another_host(client, team):
    client.force_login(team.admin)
    for url in page_urls(team):
        html = client.get(url).content.decode()
        remote = re.findall(r'(?:src|href|action|ws-connect)="((?:https?:)?//[^"]*)"', html)
        assert remote == [], url


def test_no_template_or_static_file_refers_to_a_remote_asset():
    """Links in licence comments are fine; a src/href/@import/url() to another host is not."""
    remote = re.compile(
        r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|@import\s+["']?(?:url\()?["']?(?:https?:)?//"""
        r"""|url\(\s*["']?(?:https?:)?//"""
    )
    found = []
    for root in [settings.BASE_DIR / "templates", settings.BASE_DIR / "static"]:
        for path in root.rglob("*"):
            if path.suffix in {".html", ".css", ".js"}:
                for match in remote.finditer(path.read_text(errors="replace")):
                    found.append(f"{path.relative_to(settings.BASE_DIR)}: {match.group(0)}")
    assert found == []
