"""The stand-in GitHub's Apps: creating one from a manifest, the conversion, installing it on
repositories and listing what an installation can read — in the shapes of GitHub's docs
("Registering a GitHub App from a manifest", the Apps and Installations REST reference).

Each App created here gets its own RSA key; the PEM is handed over once by the conversion and
JWTs signed with it are verified against its public half. Pages are plain HTML forms a browser
(or a person trying the product) fills in. Mixed into FakeGitHub (github_fake.py).
"""

from __future__ import annotations

import html
import json
import secrets
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

LISTING_PERMISSIONS = {"metadata": "read"}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def send_json(req, status: int, data) -> None:
    payload = json.dumps(data).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json; charset=utf-8")
    req.send_header("Content-Length", str(len(payload)))
    req.send_header("X-GitHub-Media-Type", "github.v3; format=json")
    req.end_headers()
    req.wfile.write(payload)


def send_html(req, status: int, title: str, body: str) -> None:
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    ).encode()
    req.send_response(status)
    req.send_header("Content-Type", "text/html; charset=utf-8")
    req.send_header("Content-Length", str(len(page)))
    req.end_headers()
    req.wfile.write(page)


def redirect(req, location: str) -> None:
    req.send_response(302)
    req.send_header("Location", location)
    req.send_header("Content-Length", "0")
    req.end_headers()


def _with_query(url: str, **params) -> str:
    return f"{url}{'&' if urlsplit(url).query else '?'}{urlencode(params)}"


def make_key() -> tuple[str, str]:
    """A new App private key (PEM, as GitHub hands it over) and its public half."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # GitHub's "BEGIN RSA PRIVATE KEY"
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@dataclass
class FakeApp:
    id: int
    slug: str
    public_key: str
    name: str = ""
    owner: str = "octo-org"
    owner_type: str = "Organization"
    manifest: dict = field(default_factory=dict)
    client_id: str = ""
    client_secret: str = ""
    webhook_secret: str = ""
    pem: str = ""  # handed over once, by the conversion


class AppsMixin:
    """FakeGitHub's App pages and endpoints (it provides repos, tokens, url, lock, problem)."""

    def init_apps(self) -> None:
        self.apps: dict[int, FakeApp] = {}
        self.codes: dict[str, int] = {}  # manifest code -> App id, until converted once
        self.installations: dict[int, dict] = {}  # id -> {"app_id", "account", "type"}
        self.next_app_id = 5100
        self.next_installation_id = 9100

    def add_app(self, app_id: int, slug: str, public_key: str) -> FakeApp:
        app = FakeApp(app_id, slug, public_key, name=slug)
        self.apps[app_id] = app
        return app

    def app_of_installation(self, installation: int) -> int | None:
        found = self.installations.get(installation)
        if found is not None:
            return found["app_id"]
        return self.app_id  # installations made by a test's add_repo belong to its App

    # -- the manifest flow (web pages) ---------------------------------------------------------
    def new_app_page(self, req, match, query, body: bytes) -> None:
        """GitHub's "Register new GitHub App" from a posted manifest: shows what it asks for
        and a "Create GitHub App" button."""
        form = parse_qs(body.decode()) if body else {}
        raw = (form.get("manifest") or [""])[0]
        state = (query.get("state") or [""])[0]
        if req.command != "POST" or not raw:
            return send_html(req, 200, "Register new GitHub App",
                             "<p>Post a <code>manifest</code> form field here to register an App "
                             "from a manifest.</p>")  # fmt: skip
        try:
            manifest = json.loads(raw)
            assert isinstance(manifest, dict) and manifest.get("url")
        except (ValueError, AssertionError):
            self.problem(f"a manifest that is not JSON with a url: {raw[:200]!r}")
            return send_html(req, 422, "Invalid manifest", "<p>The manifest is not valid.</p>")
        owner = match.groupdict().get("org") or "octocat"
        permissions = "".join(
            f"<li>{html.escape(k)}: {html.escape(str(v))}</li>"
            for k, v in (manifest.get("default_permissions") or {}).items()
        )
        events = ", ".join(html.escape(e) for e in manifest.get("default_events") or [])
        create = f"/settings/apps/new/create?{urlencode({'owner': owner, 'state': state})}"
        return send_html(req, 200, "Create GitHub App", (
            f"<form method='post' action='{html.escape(create)}'>"
            f"<p>Owner: <strong>{html.escape(owner)}</strong></p>"
            f"<label>GitHub App name <input name='name' "
            f"value='{html.escape(str(manifest.get('name') or ''))}'></label>"
            f"<p>Webhook: {html.escape(str((manifest.get('hook_attributes') or {}).get('url')))}"
            f"</p><ul class='permissions'>{permissions}</ul><p>Events: {events}</p>"
            f"<input type='hidden' name='manifest' value='{html.escape(raw)}'>"
            f"<button type='submit'>Create GitHub App for {html.escape(owner)}</button></form>"
        ))  # fmt: skip

    def create_app(self, req, match, query, body: bytes) -> None:
        """The "Create GitHub App" button: the App exists, GitHub redirects to redirect_url."""
        form = parse_qs(body.decode())
        manifest = json.loads((form.get("manifest") or ["{}"])[0])
        name = (form.get("name") or [manifest.get("name") or ""])[0].strip() or "inspect-app"
        owner = (query.get("owner") or ["octocat"])[0]
        state = (query.get("state") or [""])[0]
        private, public = make_key()
        with self.lock:
            app_id = self.next_app_id
            self.next_app_id += 1
            slug = "-".join(name.lower().split())
            if any(a.slug == slug for a in self.apps.values()):
                slug = f"{slug}-{app_id}"
            app = FakeApp(
                app_id, slug, public, name=name, owner=owner,
                owner_type="User" if owner == "octocat" else "Organization",
                manifest=manifest, client_id=f"Iv1.{secrets.token_hex(8)}",
                client_secret=secrets.token_hex(20), webhook_secret=secrets.token_hex(20),
                pem=private,
            )  # fmt: skip
            self.apps[app_id] = app
            code = secrets.token_hex(20)
            self.codes[code] = app_id
        target = manifest.get("redirect_url") or manifest["url"]
        params = {"code": code, **({"state": state} if state else {})}
        return redirect(req, _with_query(target, **params))

    def conversions(self, req, match, query, body):
        """POST /app-manifests/{code}/conversions: 201 with the App, its key and secrets; the
        code works once."""
        with self.lock:
            app_id = self.codes.pop(match["code"], None)
        if app_id is None:
            return 404, {"message": "Not Found",
                         "documentation_url": "https://docs.github.com/rest/apps/apps"
                                              "#create-a-github-app-from-a-manifest"}  # fmt: skip
        app = self.apps[app_id]
        pem, app.pem = app.pem, ""
        return 201, {
            **self.app_json(app),
            "client_id": app.client_id, "client_secret": app.client_secret,
            "webhook_secret": app.webhook_secret, "pem": pem,
        }  # fmt: skip

    def app_json(self, app: FakeApp) -> dict:
        manifest = app.manifest
        return {
            "id": app.id, "slug": app.slug, "node_id": f"A_kwDO{app.id:08d}",
            "owner": {"login": app.owner, "id": 1, "node_id": "MDEyOk9yZ2FuaXphdGlvbjE=",
                      "type": app.owner_type, "site_admin": False,
                      "html_url": f"{self.url}/{app.owner}"},
            "name": app.name, "description": manifest.get("description") or "",
            "external_url": manifest.get("url") or "",
            "html_url": f"{self.url}/apps/{app.slug}",
            "created_at": now(), "updated_at": now(),
            "permissions": manifest.get("default_permissions") or {},
            "events": manifest.get("default_events") or [],
        }  # fmt: skip

    # -- installing (web pages) ---------------------------------------------------------------
    def install_page(self, req, match, query, body: bytes) -> None:
        """/apps/{slug}/installations/new: choose repositories; POST installs the App on them
        (one installation per owner) and redirects to the App's setup URL."""
        app = next((a for a in self.apps.values() if a.slug == match["slug"]), None)
        if app is None:
            return send_html(req, 404, "Not Found", "<p>No such App.</p>")
        if req.command == "GET":
            boxes = "".join(
                f"<li><label><input type='checkbox' name='repository' "
                f"value='{html.escape(r.full_name)}'> {html.escape(r.full_name)}</label></li>"
                for r in sorted(self.repos.values(), key=lambda r: r.full_name)
            )
            return send_html(req, 200, f"Install {app.name}", (
                "<form method='post'><p>Only select repositories:</p>"
                f"<ul>{boxes}</ul><button type='submit'>Install</button></form>"
            ))  # fmt: skip
        chosen = parse_qs(body.decode()).get("repository") or []
        by_owner: dict[str, list] = {}
        for full_name in chosen:
            repo = self.repos.get(full_name.lower())
            if repo is not None:
                by_owner.setdefault(repo.full_name.split("/")[0], []).append(repo)
        installation = None
        with self.lock:
            for owner, repos in by_owner.items():
                installation = next(
                    (i for i, v in self.installations.items()
                     if v["app_id"] == app.id and v["account"] == owner), None,
                ) or self.next_installation_id  # fmt: skip
                if installation == self.next_installation_id:
                    self.next_installation_id += 1
                self.installations[installation] = {"app_id": app.id, "account": owner}
                for repo in repos:
                    repo.installation = installation
        setup = app.manifest.get("setup_url")
        if setup and installation is not None:
            return redirect(req, _with_query(setup, installation_id=installation,
                                              setup_action="install"))  # fmt: skip
        return redirect(req, f"{self.url}/apps/{app.slug}")

    # -- REST ----------------------------------------------------------------------------------
    def get_app(self, req, match, query, body):
        """GET /app with the App's JWT: the App itself."""
        app = self.authenticated_app(req)
        if app is None:
            return 401, {"message": "A JSON web token could not be decoded"}
        return 200, {**self.app_json(app), "client_id": app.client_id or None,
                     "installations_count": sum(1 for i in self.installations.values()
                                                if i["app_id"] == app.id)}  # fmt: skip

    def list_installations(self, req, match, query, body):
        """GET /app/installations with the App's JWT."""
        app = self.authenticated_app(req)
        if app is None:
            return 401, {"message": "A JSON web token could not be decoded"}
        ids = sorted({r.installation for r in self.repos.values() if r.installation}
                     | set(self.installations))  # fmt: skip
        return 200, [
            self.installation_json(i, app) for i in ids if self.app_of_installation(i) == app.id
        ]

    def installation_json(self, installation: int, app: FakeApp) -> dict:
        account = self.installations.get(installation, {}).get("account") or next(
            (r.full_name.split("/")[0] for r in self.repos.values()
             if r.installation == installation), "octo-org")  # fmt: skip
        return {
            "id": installation, "app_id": app.id, "app_slug": app.slug,
            "client_id": app.client_id, "target_id": 1, "target_type": "Organization",
            "account": {"login": account, "id": 1, "type": "Organization",
                        "html_url": f"{self.url}/{account}"},
            "repository_selection": "selected",
            "permissions": app.manifest.get("default_permissions") or {
                "contents": "write", "pull_requests": "write", "metadata": "read"},
            "events": app.manifest.get("default_events") or [],
            "access_tokens_url": f"{self.url}/app/installations/{installation}/access_tokens",
            "repositories_url": f"{self.url}/installation/repositories",
            "html_url": f"{self.url}/organizations/{account}/settings/installations/"
                        f"{installation}",
            "created_at": now(), "updated_at": now(), "single_file_name": None,
            "suspended_at": None, "suspended_by": None,
        }  # fmt: skip

    def installation_repositories(self, req, match, query, body):
        """GET /installation/repositories with an installation token."""
        scheme, _, value = req.headers.get("Authorization", "").partition(" ")
        token = self.tokens.get(value) if scheme.lower() in ("token", "bearer") else None
        if token is None or not token.valid:
            return 401, {"message": "Bad credentials",
                         "documentation_url": "https://docs.github.com/rest"}  # fmt: skip
        repos = [
            r for r in self.repos.values()
            if r.installation == token.installation
            and r.full_name.split("/")[1] in token.repositories
        ]  # fmt: skip
        return 200, {
            "total_count": len(repos),
            "repository_selection": "selected",
            "repositories": [self.repository_json(r) for r in repos],
        }

    def repository_json(self, repo) -> dict:
        owner, name = repo.full_name.split("/")
        try:
            head = subprocess.run(
                ["git", "symbolic-ref", "--short", "HEAD"], cwd=repo.path, check=True,
                capture_output=True, text=True,
            ).stdout.strip()  # fmt: skip
        except subprocess.CalledProcessError:
            head = "main"
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "id": repo.id, "node_id": f"R_kgDO{repo.id:08d}", "name": name,
            "full_name": repo.full_name, "private": True,
            "owner": {"login": owner, "id": 1, "type": "Organization"},
            "html_url": f"{self.url}/{repo.full_name}", "description": None, "fork": False,
            "url": api, "git_url": f"git://{urlsplit(self.url).netloc}/{repo.full_name}.git",
            "ssh_url": f"git@{urlsplit(self.url).hostname}:{repo.full_name}.git",
            "clone_url": f"{self.url}/{repo.full_name}.git", "default_branch": head,
            "visibility": "private", "archived": False, "disabled": False,
            "created_at": now(), "updated_at": now(), "pushed_at": now(),
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": False,
                            "pull": True},
        }  # fmt: skip


WEB_ROUTES = [
    (r"/settings/apps/new", AppsMixin.new_app_page),
    (r"/organizations/(?P<org>[^/]+)/settings/apps/new", AppsMixin.new_app_page),
    (r"/settings/apps/new/create", AppsMixin.create_app),
    (r"/apps/(?P<slug>[^/]+)/installations/new", AppsMixin.install_page),
]
API_ROUTES = [
    ("POST", r"/app-manifests/(?P<code>[^/]+)/conversions", AppsMixin.conversions),
    ("GET", r"/app", AppsMixin.get_app),
    ("GET", r"/app/installations", AppsMixin.list_installations),
    ("GET", r"/installation/repositories", AppsMixin.installation_repositories),
]
