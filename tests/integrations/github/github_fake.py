"""A local stand-in for GitHub: the REST endpoints the code host uses (through PyGithub and the
token request PyGithub cannot make), git's smart HTTP for clone, fetch and push, the App
manifest flow, installation pages and listings (github_fake_apps.py), reviews with line
comments, their webhooks and replies (github_fake_reviews.py), and CI: check runs, check suites
and commit statuses, with `finish_ci` to make CI finish on a commit (github_fake_checks.py). The
REST API answers at its root (as api.github.com) and under /api/v3 (as GitHub Enterprise Server).

For a person trying the product without GitHub (docs/github.md):
`python -m tests.integrations.github.github_fake --port 8765 --repo octo-org/widgets=/path/to/repo`

It answers in the shapes of GitHub's REST reference (pull requests are GitHub's published
example with this PR's values put in) and checks what it is sent: the App's JWT on App
endpoints, an installation token scoped to exactly one repository with only contents and
pull-requests write on everything else, request bodies. Anything wrong is answered as GitHub
would and also listed in `problems`, which a test asserts is empty.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import re
import secrets
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import jwt

from tests.integrations.github.github_fake_apps import (
    API_ROUTES,
    LISTING_PERMISSIONS,
    WEB_ROUTES,
    AppsMixin,
    FakeApp,
    now,
    send_json,
)
from tests.integrations.github.github_fake_checks import (
    CHECK_ROUTES,
    CHECK_WEB_ROUTES,
    CHECKS_PERMISSIONS,
    STATUSES_PERMISSIONS,
    ChecksMixin,
)
from tests.integrations.github.github_fake_reviews import (
    REVIEW_ROUTES,
    REVIEWS_PERMISSIONS,
    ReviewsMixin,
)

FIXTURES = Path(__file__).parent / "fixtures"
APP_SLUG = "inspect-web"
WANTED_PERMISSIONS = {"contents": "write", "pull_requests": "write"}
GIT_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "GIT_CONFIG_NOSYSTEM": "1"}


_now = now
_send_json = send_json


def _git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env={**GIT_ENV, **(env or {})}, check=True,
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@dataclass
class FakeRepo:
    full_name: str
    path: Path
    installation: int | None
    id: int
    pulls: list[dict] = field(default_factory=list)

    def head(self, branch: str) -> str | None:
        try:
            return _git(self.path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
        except subprocess.CalledProcessError:
            return None


@dataclass
class Token:
    value: str
    repositories: list[str]
    permissions: dict
    valid: bool = True
    installation: int | None = None


class FakeGitHub(AppsMixin, ReviewsMixin, ChecksMixin):
    def __init__(
        self, root: Path, *, app_id: int | None = None, public_key: str = "", port: int = 0
    ) -> None:
        """`app_id`/`public_key`: an App that exists already (a test's); without one, Apps are
        created through the manifest flow."""
        self.root, self.app_id, self.public_key = root, app_id, public_key
        self.init_apps()
        self.init_reviews()
        self.init_checks()
        if app_id is not None:
            self.add_app(app_id, APP_SLUG, public_key)
        self.repos: dict[str, FakeRepo] = {}
        self.tokens: dict[str, Token] = {}
        self.user_tokens: dict[str, str] = {}  # token -> login (OAuth tokens of people)
        self.requests: list[dict] = []
        self.problems: list[str] = []
        # ("METHOD /path?query" prefix, callable): run once, before the first matching request.
        self.before: list[tuple[str, object]] = []
        self.mint_invalid = False  # tokens minted from now on are refused (bad credentials)
        self.token_lifetime = timedelta(hours=1)  # GitHub's: expires_at of tokens minted now
        self.lock = threading.RLock()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.fake = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.clone_url = ""  # of the repository a fixture hosts
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- the test's controls -------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add_repo(self, full_name: str, source: Path, *, installation: int | None = 77) -> str:
        """Host a bare copy of `source` as `full_name`; returns its clone URL."""
        path = self.root / f"{full_name}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--bare", "--quiet", str(source), str(path)],
                       env=GIT_ENV, check=True)  # fmt: skip
        self.repos[full_name.lower()] = FakeRepo(
            full_name, path, installation, 1000 + len(self.repos)
        )
        return f"{self.url}/{full_name}.git"

    def repo(self, full_name: str) -> FakeRepo:
        return self.repos[full_name.lower()]

    def expire_tokens(self) -> None:
        """Every installation token minted so far stops working (as at its expiry)."""
        with self.lock:
            for token in self.tokens.values():
                token.valid = False

    def uninstall(self, full_name: str) -> None:
        """The App is uninstalled from the repository: its tokens die with it."""
        with self.lock:
            self.repo(full_name).installation = None
            self.expire_tokens()

    def calls(self, method: str, pattern: str) -> list[dict]:
        return [
            r for r in self.requests if r["method"] == method and re.fullmatch(pattern, r["path"])
        ]

    def merge_on_github(self, full_name: str, number: int, by: str = "Codertocat") -> dict:
        """A person presses Merge on GitHub."""
        repo = self.repo(full_name)
        return self._merge(
            repo, repo.pulls[number - 1], {"login": by, "id": 21031067, "type": "User"}
        )

    def webhook(self, event: str, full_name: str, number: int, **changes) -> dict:
        """GitHub's published example of `event`, about this PR of this repository."""
        repo = self.repo(full_name)
        pull = repo.pulls[number - 1]
        name = {"pull_request": "pull_request_opened",
                "pull_request_review": "pull_request_review_submitted"}[event]  # fmt: skip
        data = json.loads((FIXTURES / f"{name}.json").read_text())
        data["repository"].update(full_name=repo.full_name, name=repo.full_name.split("/")[1])
        data["pull_request"] = copy.deepcopy(pull)
        data["number"] = number
        data["installation"] = {"id": repo.installation}
        for key, value in changes.items():
            if key == "review":
                data["review"].update(value)
            else:
                data[key] = value
        if event == "pull_request_review":  # the review exists here, as on GitHub
            with self.lock:
                self.reviews.setdefault(
                    data["review"]["id"], {**data["review"], "_pull": (repo.full_name, number)}
                )
        return data

    # -- answering -----------------------------------------------------------------------------
    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def handle(self, req: _Handler) -> None:
        split = urlsplit(req.path)
        path, query = split.path, parse_qs(split.query)
        length = int(req.headers.get("Content-Length") or 0)
        if req.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = _read_chunked(req.rfile)
        else:
            body = req.rfile.read(length) if length else b""
        auth = req.headers.get("Authorization", "")
        with self.lock:
            self.requests.append({
                "method": req.command, "path": path, "query": query,
                "auth": auth.split(" ")[0], "token": auth.split(" ")[-1],
                "body": body if path.endswith("pack") else _json(body),
            })  # fmt: skip
            hook = next((h for h in self.before if f"{req.command} {req.path}".startswith(h[0])),
                        None)  # fmt: skip
            if hook is not None:
                self.before.remove(hook)
        if hook is not None:
            hook[1]()
        if ".git/" in path:
            return self._git_http(req, path, split.query, body)
        for pattern, page in [*WEB_ROUTES, *CHECK_WEB_ROUTES]:
            match = re.fullmatch(pattern, path)
            if match and req.command in ("GET", "POST"):
                return page(self, req, match, query, body)
        # GitHub Enterprise Server's API root: the API URLs in replies are under the root the
        # request came in on, as each server's are (PyGithub refuses to follow one outside it).
        req.api_root = self.url + ("/api/v3" if path.startswith("/api/v3/") else "")
        path = path.removeprefix("/api/v3")
        for method, pattern, handler in ROUTES:
            match = re.fullmatch(pattern, path)
            if match and method == req.command:
                status, data = handler(self, req, match, query, _json(body))
                return _send_json(req, status, data)
        return _send_json(req, 404, {"message": "Not Found"})

    def _app(self, req) -> bool:
        return self.authenticated_app(req) is not None

    def authenticated_app(self, req) -> FakeApp | None:
        """The App whose JWT (signed with its key, issued by its id) authenticates `req`."""
        header = req.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            self.problem(f"{req.command} {req.path} without the App's JWT ({header[:12]!r})")
            return None
        try:
            issuer = jwt.decode(header[7:], options={"verify_signature": False}).get("iss")
            app = self.apps.get(int(issuer))
            if app is None:
                raise jwt.InvalidIssuerError(f"no App {issuer}")
            claims = jwt.decode(header[7:], app.public_key, algorithms=["RS256"])
        except (jwt.PyJWTError, TypeError, ValueError) as exc:
            self.problem(f"{req.command} {req.path}: JWT refused ({exc})")
            return None
        if claims["exp"] - claims["iat"] > 660:
            self.problem(f"{req.command} {req.path}: JWT claims {claims}")
            return None
        return app

    def _installation_token(
        self, req, repo: FakeRepo, *, wanted: dict = WANTED_PERMISSIONS
    ) -> tuple[int, dict | None, str]:
        """(status, error body, kind) for a request that must carry a token for `repo` with
        the `wanted` permissions (publishing's, unless told)."""
        header = req.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "basic":
            user, _, value = base64.b64decode(value).decode().partition(":")
            if user != "x-access-token":
                self.problem(f"git auth as {user!r}, not x-access-token")
        elif scheme.lower() not in ("token", "bearer"):
            return 401, {"message": "Requires authentication"}, ""
        if value in self.user_tokens:
            return 200, None, "user"
        token = self.tokens.get(value)
        if token is None or not token.valid:
            return 401, {"message": "Bad credentials",
                         "documentation_url": "https://docs.github.com/rest"}, ""  # fmt: skip
        if token.permissions != wanted:
            self.problem(
                f"a token with {token.permissions} used on {repo.full_name} "
                f"({req.command} {req.path})"
            )
            return 403, {"message": "Resource not accessible by integration"}, ""
        if token.repositories != [repo.full_name.split("/")[1]]:
            self.problem(f"token for {token.repositories} used on {repo.full_name}")
            return 404, {"message": "Not Found"}, ""
        return 200, None, "app"

    def _git_http(self, req, path: str, query: str, body: bytes) -> None:
        full_name = path.split(".git/")[0].strip("/")
        repo = self.repos.get(full_name.lower())
        if repo is None:
            return _send_json(req, 404, {"message": "Repository not found."})
        status, _, kind = self._installation_token(req, repo)
        if status != 200 or kind != "app":
            # Unauthenticated git is asked for credentials; the worker has none but the token.
            req.send_response(401)
            req.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        env = {
            **GIT_ENV,
            "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": req.command,
            "CONTENT_TYPE": req.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_CONTENT_ENCODING": req.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": req.headers.get("Git-Protocol", ""),
        }  # fmt: skip
        result = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        head, _, payload = result.stdout.partition(b"\r\n\r\n")
        status_line = 200
        headers = []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(": ")
            if name.lower() == "status":
                status_line = int(value.split()[0])
            elif name:
                headers.append((name, value))
        req.send_response(status_line)
        for name, value in headers:
            req.send_header(name, value)
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        req.wfile.write(payload)

    # -- REST endpoints ------------------------------------------------------------------------
    def access_tokens(self, req, match, query, body):
        app = self.authenticated_app(req)
        if app is None:
            return 401, {"message": "A JSON web token could not be decoded"}
        installation = int(match["id"])
        repos = [r for r in self.repos.values() if r.installation == installation]
        if not repos or self.app_of_installation(installation) != app.id:
            return 404, {"message": "Not Found"}
        names = {r.full_name.split("/")[1]: r for r in repos}
        wanted = (body or {}).get("repositories")
        permissions = (body or {}).get("permissions")
        if wanted is None and permissions == LISTING_PERMISSIONS:
            wanted = list(names)  # a token to list the installation's repositories, no more
        else:
            if not isinstance(wanted, list) or len(wanted) != 1:
                self.problem(f"a token asked for repositories {wanted!r}, not exactly one")
            if permissions not in (
                WANTED_PERMISSIONS, CHECKS_PERMISSIONS, STATUSES_PERMISSIONS, REVIEWS_PERMISSIONS
            ):  # fmt: skip
                self.problem(f"a token asked for permissions {permissions!r}")
        if not wanted or any(name not in names for name in wanted):
            return 422, {"message": "There is at least one repository that does not exist or is "
                                    "not accessible to the parent installation."}  # fmt: skip
        token = Token("ghs_" + secrets.token_hex(18), list(wanted), permissions,
                      valid=not self.mint_invalid, installation=installation)  # fmt: skip
        with self.lock:
            self.tokens[token.value] = token
        return 201, {
            "token": token.value,
            "expires_at": (datetime.now(UTC) + self.token_lifetime).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": token.permissions,
            "repository_selection": "selected",
            "repositories": [
                {"id": names[n].id, "name": n, "full_name": names[n].full_name} for n in wanted
            ],  # fmt: skip
        }

    def installation(self, req, match, query, body):
        app = self.authenticated_app(req)
        if app is None:
            return 401, {"message": "A JSON web token could not be decoded"}
        repo = self.repos.get(f"{match['owner']}/{match['repo']}".lower())
        if (
            repo is None
            or repo.installation is None
            or self.app_of_installation(repo.installation) != app.id
        ):
            return 404, {"message": "Not Found",
                         "documentation_url": "https://docs.github.com/rest/apps/apps"}  # fmt: skip
        return 200, self.installation_json(repo.installation, app)

    def _repo_request(self, req, match):
        repo = self.repos.get(f"{match['owner']}/{match['repo']}".lower())
        if repo is None:
            return None, (404, {"message": "Not Found"}), ""
        status, error, kind = self._installation_token(req, repo)
        if status != 200:
            return None, (status, error), ""
        return repo, None, kind

    def list_pulls(self, req, match, query, body):
        repo, error, _ = self._repo_request(req, match)
        if error:
            return error
        state = (query.get("state") or ["open"])[0]
        head = (query.get("head") or [""])[0]
        found = [p for p in repo.pulls if (state == "all" or p["state"] == state)
                 and (not head or p["head"]["label"] == head)]  # fmt: skip
        return 200, found

    def create_pull(self, req, match, query, body):
        repo, error, kind = self._repo_request(req, match)
        if error:
            return error
        body = body or {}
        missing = [k for k in ("title", "head", "base") if not body.get(k)]
        if missing:
            self.problem(f"POST pulls without {missing}")
            return 422, {"message": "Validation Failed"}
        head_sha, base_sha = repo.head(body["head"]), repo.head(body["base"])
        if head_sha is None or base_sha is None:
            return 422, {"message": "Validation Failed", "errors": [
                {"resource": "PullRequest", "field": "head", "code": "invalid"}]}  # fmt: skip
        owner = repo.full_name.split("/")[0]
        if any(p["head"]["ref"] == body["head"] and p["state"] == "open" for p in repo.pulls):
            exists = f"A pull request already exists for {owner}:{body['head']}."
            return 422, {"message": "Validation Failed", "errors": [
                {"resource": "PullRequest", "code": "custom", "message": exists}]}  # fmt: skip
        if kind == "user":
            login = self.user_tokens[req.headers["Authorization"].split(" ")[-1]]
            user = {"login": login, "id": 21031067, "type": "User"}
        else:
            user = {"login": f"{APP_SLUG}[bot]", "id": 9919, "type": "Bot"}
        return 201, self.new_pull(repo, body, user, head_sha, base_sha, req.api_root)

    def new_pull(
        self, repo: FakeRepo, body: dict, user: dict, head_sha: str, base_sha: str, api_root: str
    ) -> dict:
        """Open a pull request (GitHub's published example with these values put in)."""
        owner = repo.full_name.split("/")[0]
        number = len(repo.pulls) + 1
        template = json.loads((FIXTURES / "pull_request_opened.json").read_text())["pull_request"]
        api = f"{api_root}/repos/{repo.full_name}/pulls/{number}"
        template.update(
            id=500 + number, number=number, url=api, state="open", title=body["title"],
            body=body.get("body") or "", user=user, draft=bool(body.get("draft")),
            html_url=f"https://github.com/{repo.full_name}/pull/{number}",
            created_at=_now(), updated_at=_now(), closed_at=None, merged_at=None,
            merge_commit_sha=None, merged=False, merged_by=None, mergeable=True,
            head={"label": f"{owner}:{body['head']}", "ref": body["head"], "sha": head_sha},
            base={"label": f"{owner}:{body['base']}", "ref": body["base"], "sha": base_sha},
            requested_reviewers=[], assignees=[], labels=[],
        )  # fmt: skip
        with self.lock:
            repo.pulls.append(template)
        return template

    def get_pull(self, req, match, query, body):
        repo, error, _ = self._repo_request(req, match)
        if error:
            return error
        number = int(match["number"])
        if not 0 < number <= len(repo.pulls):
            return 404, {"message": "Not Found"}
        pull = repo.pulls[number - 1]
        pull["head"]["sha"] = repo.head(pull["head"]["ref"]) or pull["head"]["sha"]
        return 200, {**pull, "url": f"{req.api_root}/repos/{repo.full_name}/pulls/{number}"}

    def update_pull(self, req, match, query, body):
        repo, error, _ = self._repo_request(req, match)
        if error:
            return error
        number = int(match["number"])
        if not 0 < number <= len(repo.pulls):
            return 404, {"message": "Not Found"}
        pull = repo.pulls[number - 1]
        unknown = set(body or {}) - {"title", "body", "state", "base", "maintainer_can_modify"}
        if unknown:
            self.problem(f"PATCH pulls/{number} with {sorted(unknown)}")
        pull.update({k: v for k, v in (body or {}).items() if k in ("title", "body")})
        pull["updated_at"] = _now()
        return 200, pull

    def merge_pull(self, req, match, query, body):
        repo, error, kind = self._repo_request(req, match)
        if error:
            return error
        number = int(match["number"])
        if not 0 < number <= len(repo.pulls):
            return 404, {"message": "Not Found"}
        pull = repo.pulls[number - 1]
        if pull["state"] != "open":
            return 405, {"message": "Pull Request is not mergeable"}
        head = repo.head(pull["head"]["ref"])
        if (body or {}).get("sha") and body["sha"] != head:
            return 409, {"message": "Head branch was modified. Review and try the merge again."}
        merged = self._merge(repo, pull, {"login": f"{APP_SLUG}[bot]", "id": 9919, "type": "Bot"},
                             title=(body or {}).get("commit_title"))  # fmt: skip
        return 200, {"sha": merged["merge_commit_sha"], "merged": True,
                      "message": "Pull Request successfully merged"}  # fmt: skip

    def _merge(self, repo: FakeRepo, pull: dict, by: dict, title: str | None = None) -> dict:
        base, head = repo.head(pull["base"]["ref"]), repo.head(pull["head"]["ref"])
        tree = _git(repo.path, "merge-tree", "--write-tree", base, head).split()[0]
        email = "noreply@github.com"
        who = {"GIT_AUTHOR_NAME": by["login"], "GIT_AUTHOR_EMAIL": email,
               "GIT_COMMITTER_NAME": "GitHub", "GIT_COMMITTER_EMAIL": email}  # fmt: skip
        message = title or f"Merge pull request #{pull['number']} from {pull['head']['label']}"
        sha = _git(repo.path, "commit-tree", tree, "-p", base, "-p", head, "-m", message, env=who)
        _git(repo.path, "update-ref", f"refs/heads/{pull['base']['ref']}", sha)
        pull.update(state="closed", merged=True, merged_at=_now(), closed_at=_now(),
                    merge_commit_sha=sha, merged_by=by)  # fmt: skip
        return pull


ROUTES = [
    *API_ROUTES,
    *REVIEW_ROUTES,
    *CHECK_ROUTES,
    ("POST", r"/app/installations/(?P<id>\d+)/access_tokens", FakeGitHub.access_tokens),
    ("GET", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/installation", FakeGitHub.installation),
    ("GET", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls", FakeGitHub.list_pulls),
    ("POST", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls", FakeGitHub.create_pull),
    ("GET", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls/(?P<number>\d+)", FakeGitHub.get_pull),
    ("PATCH", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls/(?P<number>\d+)",
     FakeGitHub.update_pull),
    ("PUT", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls/(?P<number>\d+)/merge",
     FakeGitHub.merge_pull),
]  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.fake.handle(self)  # type: ignore[attr-defined]

    do_POST = do_PUT = do_PATCH = do_GET

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass


def _json(body: bytes):
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _read_chunked(stream) -> bytes:
    data = b""
    while True:
        size = int(stream.readline().strip() or b"0", 16)
        if size == 0:
            stream.readline()
            return data
        data += stream.read(size)
        stream.readline()


def main(argv: list[str] | None = None) -> None:
    """Run the stand-in until interrupted, hosting the given repositories; Apps are created on
    it with Settings → GitHub → Connect GitHub (GitHub address: the URL printed)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME=PATH",
                        help="a git repository to host as OWNER/NAME (repeatable)")  # fmt: skip
    options = parser.parse_args(argv)
    fake = FakeGitHub(Path(tempfile.mkdtemp(prefix="github-standin-")), port=options.port)
    for item in options.repo:
        full_name, _, source = item.partition("=")
        if full_name.count("/") != 1 or not source:
            parser.error(f"--repo {item!r} is not OWNER/NAME=PATH")
        fake.add_repo(full_name, Path(source), installation=None)
    print(f"GitHub stand-in at {fake.url} (API {fake.url}/api/v3), hosting "
          f"{', '.join(r.full_name for r in fake.repos.values()) or 'no repositories'}",
          flush=True)  # fmt: skip
    try:
        fake.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake.server.server_close()
        for problem in fake.problems:
            print("problem:", problem)


if __name__ == "__main__":
    main()
