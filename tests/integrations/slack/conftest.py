"""A local server speaking Slack's Web API (and an OpenAI-compatible chat endpoint for the
router), requests signed like Slack signs them, and a Celery worker pointed at the fake."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings

from tests.api.conftest import forget_stop_requests  # noqa: F401 - autouse fixture
from tests.conftest import _stop_process, child_env

SECRET = "test-signing-secret"
BOT_TOKEN = "xoxb-test-token"
AGENT = 'echo "slack: $INSPECT_PROMPT"'


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.emails: dict[str, str] = {}
        self.model_answer = "unknown"
        self._ts = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self.do_POST()

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                kind = self.headers.get("Content-Type", "")
                if "json" in kind:
                    body = json.loads(raw or b"{}")
                else:
                    body = {k: v[-1] for k, v in parse_qs(raw.decode() or url.query).items()}
                method = url.path.rsplit("/", 1)[-1]
                call = {"method": method, "auth": self.headers.get("Authorization"),
                        "content_type": kind, "body": body}  # fmt: skip
                fake.calls.append(call)
                if method == "completions":
                    return self._answer({"choices": [{"message": {"content": fake.model_answer}}]})
                if call["auth"] != f"Bearer {BOT_TOKEN}":
                    return self._answer({"ok": False, "error": "invalid_auth"})
                if method == "users.info":
                    email = fake.emails.get(body.get("user", ""), "")
                    return self._answer({"ok": True, "user": {"profile": {"email": email}}})
                if method in {"chat.postMessage", "chat.update"}:
                    fake._ts += 1
                    ts = body.get("ts") or f"1700000000.{fake._ts:06d}"
                    return self._answer({"ok": True, "channel": body.get("channel"), "ts": ts})
                return self._answer({"ok": False, "error": "unknown_method"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/api/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, method: str) -> list[dict]:
        return [c for c in self.calls if c["method"] == method]

    def wait_for(self, predicate, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = predicate()
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"timed out; Slack saw {json.dumps(self.calls)[:2000]}")


@pytest.fixture
def fake_slack(settings):
    fake = FakeSlack()
    settings.SLACK_API_URL = fake.url
    settings.SLACK_BOT_TOKEN = BOT_TOKEN
    settings.SLACK_SIGNING_SECRET = SECRET
    settings.SLACK_AGENT_COMMAND = AGENT
    settings.PUBLIC_URL = "https://inspect.example.test"
    yield fake
    fake.server.shutdown()


def signed(body: bytes, *, secret: str = SECRET, age: int = 0) -> dict[str, str]:
    """The headers Slack sends: v0 HMAC-SHA256 over `v0:{timestamp}:{body}`."""
    timestamp = str(int(time.time()) - age)
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256)
    return {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp,
        "HTTP_X_SLACK_SIGNATURE": "v0=" + digest.hexdigest(),
    }


@pytest.fixture
def slack_worker(transactional_db, fake_slack):
    """A real Celery worker whose Slack Web API is the fake."""
    from inspect_web.celery import app
    from tests.conftest import purge_task_queues

    purge_task_queues()
    name = f"slack-{time.monotonic_ns()}"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "inspect_web", "worker", "-P", "solo",
         "-l", "warning", "-n", f"{name}@%h", "-Q", f"celery,{settings.TURN_QUEUE}",
         "--without-mingle", "--without-gossip"],
        env=child_env(SLACK_API_URL=fake_slack.url, SLACK_BOT_TOKEN=BOT_TOKEN,
                      INSPECT_SLACK_AGENT_COMMAND=AGENT,
                      INSPECT_PUBLIC_URL="https://inspect.example.test"),
        cwd=settings.BASE_DIR,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(k.startswith(name) for r in app.control.ping(timeout=0.5) for k in r):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("the Celery worker did not start")
    yield process
    _stop_process(process)
