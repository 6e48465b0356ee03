"""The stand-in GitHub run by hand: its CI page makes CI finish on a branch and sends GitHub's
deliveries, signed with the App's webhook secret, to the App's webhook."""

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from tests.integrations.github.conftest import REPO


def test_the_ci_page_sends_signed_deliveries_to_the_apps_webhook(github_server):
    received: list[tuple[str, bytes, str]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the base class's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.headers["X-GitHub-Event"], body,
                             self.headers["X-Hub-Signature-256"]))  # fmt: skip
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        app = github_server.apps[4242]
        app.manifest = {"hook_attributes": {"url": f"http://127.0.0.1:{server.server_port}/"}}
        app.webhook_secret = "the App's secret"
        page = f"{github_server.url}/_stand-in/ci/{REPO}"
        assert "Finish CI" in httpx.get(page).text
        form = {"ref": "main", "name": "lint", "conclusion": "failure", "summary": "2 problems",
                "text": "E501 line too long"}  # fmt: skip
        answer = httpx.post(page, data=form)
        assert answer.status_code == 200, answer.text
    finally:
        server.shutdown()
    assert [event for event, _, _ in received] == ["check_run", "check_run", "check_suite"]
    for _, body, signature in received:
        expected = hmac.new(b"the App's secret", body, hashlib.sha256).hexdigest()
        assert signature == f"sha256={expected}"
    completed = json.loads(received[1][1])
    run = completed["check_run"]
    assert (completed["action"], run["name"], run["conclusion"]) == ("completed", "lint", "failure")
    assert run["output"]["text"] == "E501 line too long"
    assert completed["repository"]["full_name"] == REPO
    assert github_server.problems == []
