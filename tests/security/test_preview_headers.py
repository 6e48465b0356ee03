"""The live preview serves agent-written code from the dashboard's origin: the application's
response headers must not act on that origin (wipe its storage, pin HSTS, collect reports, open
CORS) and its redirects must not leave the preview (an open redirect from the dashboard)."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

APP = """\
import http.server

HOSTILE = {
    "Clear-Site-Data": '"cache", "cookies", "storage"',
    "NEL": '{"report_to": "default", "max_age": 31536000, "include_subdomains": true}',
    "Report-To": '{"group": "default", "max_age": 31536000, "endpoints": [{"url": "https://evil.example/r"}]}',
    "Reporting-Endpoints": 'default="https://evil.example/r"',
    "Strict-Transport-Security": "max-age=63072000; includeSubDomains; preload",
    "Refresh": "0; url=https://evil.example/",
    "Access-Control-Allow-Origin": "https://evil.example",
    "Access-Control-Allow-Credentials": "true",
    "WWW-Authenticate": 'Basic realm="Inspect Web: sign in again"',
    "Link": '<https://evil.example/x.js>; rel=preload; as=script',
    "Content-Security-Policy": "default-src *",
    "Permissions-Policy": "camera=*",
    "Service-Worker-Allowed": "/",
    "Set-Cookie": "sessionid=stolen; Path=/",
    "X-Custom": "custom",
}
KEPT = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Language": "en",
    "ETag": '"v1"',
    "Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT",
    "Vary": "Accept-Encoding",
}
REDIRECTS = {
    "/off-site": "https://evil.example/",
    "/scheme-relative": "//evil.example/",
    "/backslash": "/\\\\evil.example/",  # browsers read it as //evil.example/
    "/javascript": "javascript:alert(1)",
    "/self-absolute": "http://127.0.0.1:8000/new?x=1",
    "/self-other-port": "http://127.0.0.1:9000/new",
    "/climb": "../../../../admin/",
}

class App(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path in REDIRECTS:
            self.send_response(302)
            self.send_header("Location", REDIRECTS[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<p>hello</p>"
        self.send_response(200)
        for name, value in {**HOSTILE, **KEPT}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

http.server.HTTPServer(("127.0.0.1", 8000), App).serve_forever()
"""
RECIPE = 'preview = { command = "python3 app.py", url = "http://127.0.0.1:8000/" }\n'
HOSTILE = ["Clear-Site-Data", "NEL", "Report-To", "Reporting-Endpoints",
           "Strict-Transport-Security", "Refresh", "Access-Control-Allow-Origin",
           "Access-Control-Allow-Credentials", "WWW-Authenticate", "Link", "Permissions-Policy",
           "Service-Worker-Allowed", "Set-Cookie", "X-Custom"]  # fmt: skip


@pytest.fixture
def hostile_session(inspect_cli, make_git_repo, team, create_session):
    from sessions.models import Session

    upstream = make_git_repo(
        files={"README.md": "# widgets\n", "app.py": APP, ".inspect/environment.toml": RECIPE}
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")
    session = Session.objects.get(pk=summary["id"])
    assert session.sandbox_id
    return session


def test_the_applications_headers_do_not_reach_the_dashboards_origin(hostile_session, team):
    client = Client()
    client.force_login(team.engineer)
    base = f"/sessions/{hostile_session.pk}/preview"
    page = client.get(f"{base}/")
    assert page.status_code == 200 and page.content == b"<p>hello</p>"
    leaked = [name for name in HOSTILE if name in page.headers]
    assert leaked == []
    assert page["Content-Security-Policy"].startswith("sandbox ")  # ours, not the app's
    assert page["Content-Type"] == "text/html; charset=utf-8"
    assert (page["Content-Language"], page["ETag"]) == ("en", '"v1"')
    assert page["Last-Modified"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert "Accept-Encoding" in page["Vary"]

    # Redirects off-site are not followed; the app's own absolute ones stay in the preview.
    refused = ("/off-site", "/scheme-relative", "/backslash", "/self-other-port", "/javascript")
    for path in refused:
        answer = client.get(base + path)
        assert answer.status_code == 502, path
        assert "Location" not in answer.headers, path
        assert "not followed" in answer.content.decode()
    assert client.get(f"{base}/self-absolute")["Location"] == f"{base}/new?x=1"
    assert client.get(f"{base}/climb")["Location"] == f"{base}/admin/"


PREVIEW_HOST = "preview.example.org"


@pytest.fixture
def preview_origin(settings):
    settings.PREVIEW_ORIGIN = f"https://{PREVIEW_HOST}"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, PREVIEW_HOST]
    return settings.PREVIEW_ORIGIN


def on_preview(client: Client, url: str):
    return client.get(url, HTTP_HOST=PREVIEW_HOST, secure=True)


def test_with_a_preview_origin_the_application_runs_only_there(
    hostile_session, team, preview_origin
):
    from accounts.models import Membership

    base = f"/sessions/{hostile_session.pk}/preview"
    dashboard = Client()
    dashboard.force_login(team.engineer)
    handed = dashboard.get(f"{base}/a%20page?q=1")
    assert handed.status_code == 302 and b"hello" not in handed.content
    entry = handed["Location"]
    assert entry.startswith(f"{preview_origin}{base}/a%20page?q=1&inspect_preview_entry=inspv_")

    browser = Client()  # the preview origin's cookie jar: nothing of the dashboard's
    entered = on_preview(browser, entry.removeprefix(preview_origin))
    assert entered.status_code == 302 and entered["Location"] == f"{base}/a%20page?q=1"
    cookie = entered.cookies["inspect_preview"]
    assert cookie["path"] == f"{base}/" and cookie["httponly"] and cookie["secure"]
    assert cookie["samesite"] == "Lax"
    page = on_preview(browser, f"{base}/")
    assert page.status_code == 200 and page.content == b"<p>hello</p>"
    assert page["Content-Security-Policy"].startswith("sandbox ")
    assert "Set-Cookie" not in page.headers or "stolen" not in page["Set-Cookie"]

    # The entry token is spent; the dashboard's own login means nothing on the preview origin.
    assert on_preview(Client(), entry.removeprefix(preview_origin)).status_code == 403
    assert on_preview(dashboard, f"{base}/").status_code == 403
    # The preview origin serves nothing but previews.
    for path in ("/", f"/sessions/{hostile_session.pk}/", "/api/me/", "/admin/", "/healthz"):
        assert on_preview(browser, path).status_code == 404, path
    # The outsider gets no entry token; a member who leaves loses the preview at once.
    outsider = Client()
    outsider.force_login(team.outsider)
    assert outsider.get(f"{base}/").status_code == 404
    Membership.objects.filter(user=team.engineer, repository=team.repository).delete()
    assert on_preview(browser, f"{base}/").status_code == 404


def test_a_preview_cookie_opens_only_its_own_sessions_preview(
    hostile_session, team, preview_origin
):
    from sessions import services

    other = services.session_create(
        repository=team.repository, creator=team.engineer, prompt="y", agent_command="true"
    )
    dashboard = Client()
    dashboard.force_login(team.engineer)
    entry = dashboard.get(f"/sessions/{hostile_session.pk}/preview/")["Location"]
    browser = Client()
    on_preview(browser, entry.removeprefix(preview_origin))
    assert on_preview(browser, f"/sessions/{hostile_session.pk}/preview/").status_code == 200
    assert on_preview(browser, f"/sessions/{other.pk}/preview/").status_code == 403
