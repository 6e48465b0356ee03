"""The stand-in GitHub's pull request reviews and their line comments, in the shapes of GitHub's
REST reference ("Pull request reviews", "Pull request review comments") and its webhook
payloads (`pull_request_review` submitted, `pull_request_review_comment` created).

A test submits a review as a person would on GitHub (`submit_review`): its comments are stored,
and the webhooks GitHub sends are signed with `webhook_secret` and handed to `webhook_sink`
(a test posts them to /webhooks/github/). The App reads them back
(`GET …/pulls/{n}/comments`, `GET …/pulls/{n}/reviews/{id}/comments`) and replies
(`POST …/pulls/{n}/comments/{id}/replies`). As on GitHub, a comment whose line a later push
removed is outdated: `line` and `position` read null. Mixed into FakeGitHub (github_fake.py).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.integrations.github.github_fake_apps import now

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
PERSON = {"login": "Codertocat", "id": 21031067, "type": "User"}
APP_BOT = {"login": "inspect-web[bot]", "id": 9919, "type": "Bot"}
# The App's token for posting the review agent's review: pull requests, nothing else.
REVIEWS_PERMISSIONS = {"pull_requests": "write"}
REVIEW_EVENTS = {"COMMENT": "COMMENTED", "APPROVE": "APPROVED",
                 "REQUEST_CHANGES": "CHANGES_REQUESTED"}  # fmt: skip


def hunk_to_line(patch: str, line: int) -> str | None:
    """GitHub's `diff_hunk` for new-side `line` of a file's patch: the hunk up to that line."""
    kept: list[str] = []
    number = None
    for text in patch.splitlines():
        match = HUNK.match(text)
        if match:
            number, kept = int(match.group(1)), [text]
            continue
        if number is None or text.startswith("\\"):
            continue
        kept.append(text)
        if text.startswith("-"):
            continue
        if number == line:
            return "\n".join(kept)
        number += 1
    return None


class ReviewsMixin:
    """Reviews and review comments of the stand-in's pull requests."""

    def init_reviews(self) -> None:
        self.reviews: dict[int, dict] = {}  # id -> review (REST shape) with "_pull": (repo, n)
        self.review_comments: dict[int, dict] = {}  # id -> comment (REST shape) + "_pull"
        self.webhook_secret = ""
        # (event, body, headers) -> anything: where signed deliveries go (a test's client).
        self.webhook_sink: Callable[[str, bytes, dict], object] | None = None
        self.deliveries: list[tuple[str, dict]] = []
        self._next_id = 2_000_000

    def _new_id(self) -> int:
        with self.lock:
            self._next_id += 1
            return self._next_id

    # -- the test's controls -------------------------------------------------------------------
    def submit_review(
        self, full_name: str, number: int, *, state: str = "COMMENTED", body: str = "",
        comments: list[dict] = (), by: dict = PERSON,  # type: ignore[assignment]
    ) -> dict:  # fmt: skip
        """A person submits a review of PR `number` with line comments (each: path, line,
        body, and optionally side and diff_hunk, which is otherwise read from the PR's diff);
        its webhooks are delivered: one `pull_request_review_comment` per comment, then
        `pull_request_review` submitted. Returns the review (REST shape)."""
        repo = self.repo(full_name)
        pull = repo.pulls[number - 1]
        head = repo.head(pull["head"]["ref"])
        api = f"{self.url}/repos/{repo.full_name}/pulls/{number}"
        page = f"https://github.com/{repo.full_name}/pull/{number}"
        review_id = self._new_id()
        review = {
            "id": review_id, "node_id": f"PRR_{review_id}", "user": dict(by), "body": body,
            "state": state.upper(), "html_url": f"{page}#pullrequestreview-{review_id}",
            "pull_request_url": api, "author_association": "MEMBER",
            "_links": {"html": {"href": f"{page}#pullrequestreview-{review_id}"},
                       "pull_request": {"href": api}},
            "submitted_at": now(), "commit_id": head,
        }  # fmt: skip
        made = []
        for wanted in comments:
            hunk = wanted.get("diff_hunk") or self._diff_hunk(repo, pull, wanted["path"],
                                                              wanted["line"])  # fmt: skip
            if hunk is None:  # as GitHub answers 422 "Line could not be resolved"
                raise ValueError(f"line {wanted['line']} of {wanted['path']} is not in the diff")
            made.append(self._comment(repo, number, review_id, by, head, hunk, wanted))
        with self.lock:
            self.reviews[review_id] = {**review, "_pull": (repo.full_name, number)}
            for comment in made:
                self.review_comments[comment["id"]] = {**comment, "_pull": (repo.full_name, number)}
        for comment in made:
            data = self.webhook("pull_request_review", repo.full_name, number, review=review)
            data.pop("review")
            data.update(action="created", comment=comment, sender=dict(by))
            self.deliver("pull_request_review_comment", data)
        hooked = dict(review, state=state.lower())  # webhooks carry the state in lower case
        data = self.webhook("pull_request_review", repo.full_name, number, review=hooked,
                            sender=dict(by))  # fmt: skip
        data["review"] = hooked
        self.deliver("pull_request_review", data)
        return review

    def push_to_branch(self, full_name: str, branch: str, files: dict[str, str],
                       *, start: str = "main", message: str = "edit on GitHub") -> str:  # fmt: skip
        """Someone commits `files` to `branch` on GitHub (created from `start` if new)."""
        repo = self.repo(full_name)
        work = Path(tempfile.mkdtemp(prefix="github-push-"))
        try:
            _git_out(work, "clone", "--quiet", str(repo.path), "tree")
            tree = work / "tree"
            exists = repo.head(branch) is not None
            _git_out(
                tree, "checkout", "--quiet", "-B", branch, f"origin/{branch if exists else start}"
            )
            for name, text in files.items():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                (tree / name).write_text(text)
            _git_out(tree, "add", "-A")
            _git_out(tree, "-c", "user.name=Codertocat", "-c", "user.email=octocat@github.com",
                     "commit", "--quiet", "-m", message)  # fmt: skip
            _git_out(tree, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return repo.head(branch) or ""

    def open_pull_on_github(self, full_name: str, branch: str, files: dict[str, str],
                            *, title: str = "a change") -> dict:  # fmt: skip
        """A branch with `files` changed and a pull request from it to `main`, opened as the
        App would have (for tests that need a PR without running a session's turn)."""
        repo = self.repo(full_name)
        head = self.push_to_branch(full_name, branch, files)
        bot = {"login": "inspect-web[bot]", "id": 9919, "type": "Bot"}
        body = {"title": title, "head": branch, "base": "main", "body": ""}
        return self.new_pull(repo, body, bot, head, repo.head("main") or "", self.url)

    def deliver(self, event: str, payload: dict, *, delivery: str | None = None) -> object:
        """Sign `payload` as GitHub does and hand it to `webhook_sink`; returns its answer."""
        body = json.dumps(payload).encode()
        signature = hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": f"sha256={signature}",
            "User-Agent": "GitHub-Hookshot/044aadd",
        }
        with self.lock:
            self.deliveries.append((event, copy.deepcopy(payload)))
        if self.webhook_sink is None:
            self.problem(f"a {event} webhook with no webhook_sink to deliver it to")
            return None
        return self.webhook_sink(event, body, headers)

    def redeliver(self, event: str) -> object:
        """GitHub's "Redeliver" of the newest `event` delivery (a new delivery id)."""
        payload = next(p for e, p in reversed(self.deliveries) if e == event)
        return self.deliver(event, payload)

    # -- shapes ----------------------------------------------------------------------------------
    def _comment(self, repo, number: int, review_id: int, by: dict, head: str, hunk: str,
                 wanted: dict) -> dict:  # fmt: skip
        comment_id = self._new_id()
        api = f"{self.url}/repos/{repo.full_name}/pulls"
        page = f"https://github.com/{repo.full_name}/pull/{number}"
        position = len(hunk.splitlines()) - 1
        return {
            "url": f"{api}/comments/{comment_id}", "pull_request_review_id": review_id,
            "id": comment_id, "node_id": f"PRRC_{comment_id}", "diff_hunk": hunk,
            "path": wanted["path"], "position": position, "original_position": position,
            "commit_id": head, "original_commit_id": head, "user": dict(by),
            "body": wanted["body"], "created_at": now(), "updated_at": now(),
            "html_url": f"{page}#discussion_r{comment_id}", "pull_request_url": f"{api}/{number}",
            "author_association": "MEMBER",
            "_links": {"self": {"href": f"{api}/comments/{comment_id}"},
                       "html": {"href": f"{page}#discussion_r{comment_id}"},
                       "pull_request": {"href": f"{api}/{number}"}},
            "start_line": None, "original_start_line": None, "start_side": None,
            "line": wanted["line"], "original_line": wanted["line"],
            "side": wanted.get("side", "RIGHT"), "subject_type": "line",
        }  # fmt: skip

    def _diff_hunk(self, repo, pull: dict, path: str, line: int) -> str | None:
        base, head = repo.head(pull["base"]["ref"]), repo.head(pull["head"]["ref"])
        patch = _git_out(repo.path, "diff", f"{base}...{head}", "--", path)
        return hunk_to_line(patch, line)

    def _as_now(self, comment: dict) -> dict:
        """The comment as GitHub shows it after later pushes: on the same line while that
        line's text is still there at the head, else outdated (`line`/`position` null)."""
        full_name, number = comment["_pull"]
        repo = self.repo(full_name)
        head = repo.head(repo.pulls[number - 1]["head"]["ref"])
        shown = {k: v for k, v in comment.items() if k != "_pull"}
        if head == comment["original_commit_id"] or comment["original_line"] is None:
            return shown
        said = comment["diff_hunk"].splitlines()[-1][1:]
        try:
            now = _git_out(repo.path, "show", f"{head}:{comment['path']}").splitlines()
        except subprocess.CalledProcessError:
            now = []
        line = comment["original_line"]
        if 0 < line <= len(now) and now[line - 1] == said:
            return {**shown, "commit_id": head}
        return {**shown, "commit_id": head, "line": None, "position": None}

    # -- REST endpoints ------------------------------------------------------------------------
    def _pull_of(self, req, match):
        repo, error, _ = self._repo_request(req, match)
        if error:
            return None, error
        number = int(match["number"])
        if not 0 < number <= len(repo.pulls):
            return None, (404, {"message": "Not Found"})
        return (repo, number), None

    def list_review_comments(self, req, match, query, body):
        pull, error = self._pull_of(req, match)
        if error:
            return error
        key = (pull[0].full_name, pull[1])
        return 200, [self._as_now(c) for c in self.review_comments.values() if c["_pull"] == key]

    def list_comments_of_review(self, req, match, query, body):
        pull, error = self._pull_of(req, match)
        if error:
            return error
        review = self.reviews.get(int(match["review"]))
        if review is None or review["_pull"] != (pull[0].full_name, pull[1]):
            return 404, {"message": "Not Found"}
        return 200, [self._as_now(c) for c in self.review_comments.values()
                     if c["pull_request_review_id"] == review["id"]]  # fmt: skip

    def reply_to_comment(self, req, match, query, body):
        pull, error = self._pull_of(req, match)
        if error:
            return error
        parent = self.review_comments.get(int(match["comment"]))
        if parent is None or parent["_pull"] != (pull[0].full_name, pull[1]):
            return 404, {"message": "Not Found"}
        text = (body or {}).get("body")
        if not isinstance(text, str) or not text.strip():
            self.problem(f"a reply to comment {parent['id']} without a body")
            return 422, {"message": "Validation Failed"}
        if parent.get("in_reply_to_id"):
            self.problem(f"a reply to a reply ({parent['id']}), not to the thread's comment")
            return 422, {"message": "Validation Failed"}
        bot = {"login": "inspect-web[bot]", "id": 9919, "type": "Bot"}
        reply = {
            **{k: v for k, v in parent.items() if k != "_pull"},
            "id": self._new_id(), "body": text, "user": bot, "in_reply_to_id": parent["id"],
            "pull_request_review_id": self._new_id(), "created_at": now(),
            "updated_at": now(), "author_association": "NONE",
        }  # fmt: skip
        reply["html_url"] = parent["html_url"].split("#")[0] + f"#discussion_r{reply['id']}"
        with self.lock:
            self.review_comments[reply["id"]] = {**reply, "_pull": parent["_pull"]}
        return 201, reply

    def create_review(self, req, match, query, body):
        """POST …/pulls/{n}/reviews as the App (GitHub's "Create a review for a pull
        request"): `event`, `commit_id`, `body`, `comments` [{path, line, side, body}]; a
        comment on a line the diff does not show is refused with 422, as on GitHub. (GitHub
        then sends `pull_request_review` from the App's bot; the stand-in sends nothing.)"""
        repo = self.repos.get(f"{match['owner']}/{match['repo']}".lower())
        if repo is None:
            return 404, {"message": "Not Found"}
        status, error, _ = self._installation_token(req, repo, wanted=REVIEWS_PERMISSIONS)
        if status != 200:
            return status, error
        number = int(match["number"])
        if not 0 < number <= len(repo.pulls):
            return 404, {"message": "Not Found"}
        body = body or {}
        event = body.get("event")
        if event not in REVIEW_EVENTS:
            self.problem(f"a review with event {event!r}")
            return 422, {"message": "Validation Failed"}
        pull = repo.pulls[number - 1]
        head = repo.head(pull["head"]["ref"])
        wanted = body.get("comments") or []
        for c in wanted:
            if not all(c.get(k) for k in ("path", "line", "body")) or c.get("side") != "RIGHT":
                self.problem(f"a review comment {c!r}")
                return 422, {"message": "Validation Failed"}
            if self._diff_hunk(repo, pull, c["path"], c["line"]) is None:
                return 422, {"message": "Unprocessable Entity",
                             "errors": ["Line could not be resolved"]}  # fmt: skip
        review_id = self._new_id()
        api = f"{self.url}/repos/{repo.full_name}/pulls/{number}"
        page = f"https://github.com/{repo.full_name}/pull/{number}"
        review = {
            "id": review_id, "node_id": f"PRR_{review_id}", "user": dict(APP_BOT),
            "body": body.get("body") or "", "state": REVIEW_EVENTS[event],
            "html_url": f"{page}#pullrequestreview-{review_id}", "pull_request_url": api,
            "author_association": "NONE",
            "_links": {"html": {"href": f"{page}#pullrequestreview-{review_id}"},
                       "pull_request": {"href": api}},
            "submitted_at": now(), "commit_id": body.get("commit_id") or head,
        }  # fmt: skip
        made = [
            self._comment(repo, number, review_id, APP_BOT, review["commit_id"],
                          self._diff_hunk(repo, pull, c["path"], c["line"]), c)
            for c in wanted
        ]  # fmt: skip
        with self.lock:
            self.reviews[review_id] = {**review, "_pull": (repo.full_name, number)}
            for comment in made:
                self.review_comments[comment["id"]] = {**comment, "_pull": (repo.full_name, number)}
        return 200, review

    def reviews_of(self, full_name: str, number: int) -> list[dict]:
        """The reviews of one PR, each with its line comments (what a person sees on GitHub)."""
        key = (self.repo(full_name).full_name, number)
        return [
            {**{k: v for k, v in r.items() if k != "_pull"},
             "comments": [c for c in self.review_comments.values()
                          if c["pull_request_review_id"] == r["id"]]}
            for r in self.reviews.values() if r["_pull"] == key
        ]  # fmt: skip

    def replies_to(self, comment_id: int) -> list[dict]:
        """The replies posted under one comment (what a person sees in its thread)."""
        return [c for c in self.review_comments.values() if c.get("in_reply_to_id") == comment_id]


def _git_out(path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=path, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp",
                                       "GIT_CONFIG_NOSYSTEM": "1"},
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


_PULL = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls/(?P<number>\d+)"
REVIEW_ROUTES = [
    ("GET", _PULL + r"/comments", ReviewsMixin.list_review_comments),
    ("GET", _PULL + r"/reviews/(?P<review>\d+)/comments", ReviewsMixin.list_comments_of_review),
    ("POST", _PULL + r"/comments/(?P<comment>\d+)/replies", ReviewsMixin.reply_to_comment),
    ("POST", _PULL + r"/reviews", ReviewsMixin.create_review),
]
