"""Drive GitHub's App manifest flow as a browser would, with Django's test client on this
site's side and HTTP on the stand-in's side (the real-browser run is
tests/browser/test_settings_github.py)."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import urlsplit

import httpx


def start(client, *, web_url: str, organization: str = "", name: str = "Inspect Test"):
    """Press Connect GitHub: (the URL the manifest is posted to, the manifest)."""
    page = client.post(
        "/settings/github/connect/",
        {"name": name, "web_url": web_url, "organization": organization},
    )
    assert page.status_code == 200, page.content.decode()
    text = page.content.decode()
    action = html.unescape(re.search(r'<form id="github-manifest" method="post" action="([^"]+)"',
                                     text)[1])  # fmt: skip
    manifest = html.unescape(re.search(r'name="manifest" value="([^"]*)"', text)[1])
    return action, json.loads(manifest)


def create_on_github(action: str, manifest: dict) -> str:
    """Post the manifest to GitHub and press "Create GitHub App": the redirect's URL (this
    site's callback with code and state)."""
    page = httpx.post(action, data={"manifest": json.dumps(manifest)})
    assert page.status_code == 200, page.text
    create = html.unescape(re.search(r"<form method='post' action='([^']+)'", page.text)[1])
    base = f"{urlsplit(action).scheme}://{urlsplit(action).netloc}"
    done = httpx.post(base + create, data={"manifest": json.dumps(manifest),
                                           "name": manifest["name"]})  # fmt: skip
    assert done.status_code == 302, done.text
    return done.headers["location"]


def callback_path(location: str) -> str:
    """The callback as a path for Django's test client."""
    split = urlsplit(location)
    return f"{split.path}?{split.query}"


def install(fake, slug: str, *full_names: str) -> str:
    """Install the App on repositories on the stand-in's page: where GitHub redirects after."""
    done = httpx.post(
        f"{fake.url}/apps/{slug}/installations/new", data={"repository": list(full_names)}
    )
    assert done.status_code == 302, done.text
    return done.headers["location"]
