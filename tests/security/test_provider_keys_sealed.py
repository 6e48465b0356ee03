"""Attack: read a model provider's key set on the Models page back out of the platform.

A key set on the page is sealed (Fernet, INSPECT_SECRETS_KEY) before it is stored, so a dump of
the whole database does not contain it; no page shows it (only "set", and its last four
characters), not even the form that refused it; the audit log records that it changed, never
the key; and a provider that echoes the key in its error does not get it onto the page.
"""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection
from django.test import Client

from approvals.models import AuditEntry
from tests.settings_area import provider_fixtures as fixtures

pytestmark = pytest.mark.django_db(transaction=True)  # committed: the dump sees the rows
no_provider_env, site_admin = fixtures.no_provider_env, fixtures.site_admin
ANTHROPIC_KEY = "sk-ant-api03-SEALED-a8f3c0d9e2b14f67"
OPENAI_KEY = "sk-proj-SEALED-77c1e0b2d94a3f58"
PAGE = "/settings/models/"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _dump() -> str:
    db = connection.settings_dict
    host, port, user = db["HOST"] or "127.0.0.1", str(db["PORT"] or 5432), db["USER"] or "postgres"
    command = ["pg_dump", "--data-only", "-h", host, "-p", port, "-U", user, db["NAME"]]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout


def test_a_dump_of_the_database_holds_no_provider_key(no_provider_env, site_admin):
    if connection.vendor != "postgresql":
        pytest.skip("pg_dump reads PostgreSQL")
    client = _client(site_admin)
    client.post(PAGE, {"action": "set", "kind": "anthropic", "key": ANTHROPIC_KEY})
    client.post(PAGE, {"action": "set", "kind": "openai", "key": OPENAI_KEY})
    dump = _dump()
    assert "ANTHROPIC_API_KEY" in dump and "fernet:" in dump  # the rows are there, sealed
    for key in (ANTHROPIC_KEY, OPENAI_KEY):
        assert key not in dump
        assert key[10:-6] not in dump  # nor any long piece of it


def test_no_page_shows_a_provider_key(no_provider_env, site_admin, team):
    client = _client(site_admin)
    client.post(PAGE, {"action": "set", "kind": "anthropic", "key": ANTHROPIC_KEY})
    pages = [client.get(PAGE).content.decode()]
    # A refused form (a bad URL) re-renders without the key typed with it.
    refused = client.post(
        PAGE,
        {"action": "set", "kind": "compatible", "key": OPENAI_KEY, "base_url": "ftp://x"},
    )
    assert refused.status_code == 400
    pages.append(refused.content.decode())
    pages.append(client.get("/settings/repositories/widgets/models/").content.decode())
    for page in pages:
        assert ANTHROPIC_KEY not in page and OPENAI_KEY not in page
        assert ANTHROPIC_KEY[:-4] not in page  # the last four at most
    assert "ending …4f67" in pages[0]
    entries = AuditEntry.objects.filter(action__startswith="model_provider")
    assert entries.exists()
    for entry in entries:
        assert ANTHROPIC_KEY not in json.dumps(entry.data)


class _Echo(BaseHTTPRequestHandler):
    """A provider whose error repeats the key it was sent (some proxies do)."""

    def do_GET(self):  # noqa: N802 - the handler's name in http.server
        sent = self.headers.get("authorization", "")[7:]
        body = json.dumps({"error": {"message": f"key {sent} is revoked", "type": "auth"}})
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def test_a_provider_echoing_the_key_does_not_put_it_on_the_page(no_provider_env, site_admin):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client(site_admin)
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        client.post(
            PAGE, {"action": "set", "kind": "compatible", "key": OPENAI_KEY, "base_url": base}
        )
        page = client.post(PAGE, {"action": "test", "kind": "compatible"}).content.decode()
    finally:
        server.shutdown()
        server.server_close()
    assert "Refused: 401: key [redacted] is revoked" in page
    assert OPENAI_KEY not in page
