"""A repository whose preview is a tiny application that echoes what it was sent."""

from __future__ import annotations

import pytest

APP = """\
import http.server, json

class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/old":
            self.send_response(302)
            self.send_header("Location", "/new")
            self.end_headers()
            return
        body = json.dumps({"path": self.path, "headers": dict(self.headers)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "sessionid=stolen; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        data = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.upper())

http.server.HTTPServer(("127.0.0.1", 8000), Echo).serve_forever()
"""
RECIPE = 'preview = { command = "python3 app.py", url = "http://127.0.0.1:8000/" }\n'


@pytest.fixture
def echo_repo(inspect_cli, make_git_repo, team):
    upstream = make_git_repo(
        files={"README.md": "# widgets\n", "app.py": APP, ".inspect/environment.toml": RECIPE}
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    return team.repository


@pytest.fixture
def live_session(echo_repo, create_session):
    """A session after one turn: idle, with its sandbox still running."""
    from sessions.models import Session

    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")
    session = Session.objects.get(pk=summary["id"])
    assert session.sandbox_id
    return session
