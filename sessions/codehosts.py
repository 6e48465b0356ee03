"""Where a session's branch goes: a local repository (a path or bare repo, reviewed and merged in
the dashboard), or a code host an upper layer registers (GitHub, from integrations/github, with
`register_code_host`).

Everything here runs on the worker, outside the sandbox: credentials never reach a sandbox. The
session's commits leave the sandbox as a git bundle, are fetched into the repository's mirror and
pushed from there.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

from accounts.identity import verified_email
from snapshots import mirror
from snapshots.models import Repository

# The mirror is a `clone --mirror` (remote.origin.mirror=true), which refuses explicit refspecs.
PUSH = ("-c", "remote.origin.mirror=false", "push", "--quiet")


class CodeHostError(RuntimeError):
    """The code host refused or failed; the message is meant for the session's viewers."""


class ReadOnlySession(CodeHostError):
    """A read-only (review) session asked its code host for something that writes."""


class AlreadyMerged(CodeHostError):
    """The code host already merged (or, with `closed`, closed) the PR, outside this platform."""

    def __init__(self, message: str, *, sha: str = "", closed: bool = False) -> None:
        super().__init__(message)
        self.sha, self.closed = sha, closed


class BranchTaken(CodeHostError):
    """The branch exists on the remote and is not this session's to move forward."""


@dataclass(frozen=True)
class OpenedPull:
    number: int | None
    url: str
    opened_as_app: bool = False


@dataclass(frozen=True)
class CheckReport:
    """A check run to publish on a pull request's head commit (the turn's verification)."""

    name: str
    head: str
    conclusion: str  # success, failure or neutral
    title: str
    summary: str  # Markdown, what a reviewer reads on the code host
    text: str
    details_url: str
    external_id: str


@dataclass(frozen=True)
class ReviewToPost:
    """A review to post on a pull request as the platform: a summary and line comments
    (path, new-side line, body), on `commit`, as a plain comment (no approval)."""

    commit: str
    body: str
    comments: list[tuple[str, int, str]]


@dataclass(frozen=True)
class PostedReview:
    id: str
    url: str


@dataclass(frozen=True)
class PublishedCheck:
    id: int | None
    url: str


def publish_ref(session_id: int) -> str:
    return f"refs/inspect/publish/{session_id}"


def git_auth_env(token: str | None) -> dict[str, str]:
    """git's http auth as config from the environment: never on a command line or in a URL."""
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


class LocalHost:
    """A repository given by a path: branches are pushed there; the PR lives in the dashboard."""

    name = "local"

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        # A review session's host (code_host_for(read_only=True)): no push, no write token.
        self.read_only = False

    def refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlySession(f"{what} refused: a review session is read-only")

    def token(self, *, refresh: bool = False) -> str | None:
        return None

    def remote_git(self, *args: str) -> str:
        """git against the repository's remote, from the mirror, with the host's credentials."""
        mirror_dir = mirror.mirror_path(self.repository.name)
        return mirror.git(*args, cwd=mirror_dir, env=git_auth_env(self.token()))

    def push(self, session_id: int, branch: str) -> None:
        """Push the session's commits to `branch`, never by force: BranchTaken when the remote
        branch holds commits this session did not make (someone else's work is not lost)."""
        self.refuse_if_read_only(f"pushing {branch}")
        try:
            self.remote_git(*PUSH, "origin", f"{publish_ref(session_id)}:refs/heads/{branch}")
        except mirror.MirrorError as exc:
            try:
                remote = self.remote_git("ls-remote", "origin", f"refs/heads/{branch}").split()
            except mirror.MirrorError:
                remote = []
            if remote:
                raise BranchTaken(
                    f"{branch} already exists on the remote with commits this session did not "
                    f"make (at {remote[0][:12]}); nothing was overwritten"
                ) from None
            raise CodeHostError(f"pushing {branch} failed: {exc}") from None

    def open_pull(self, *, branch: str, base: str, title: str, body: str, author) -> OpenedPull:
        return OpenedPull(number=None, url="")

    def update_pull(self, pr, *, body: str) -> None:
        """Bring the PR's description up to date (here it lives in the PullRequest row)."""

    def reply_to_review_comment(self, pr, comment_id: str, body: str) -> str:
        """Post `body` as a reply to the host's review comment `comment_id`; returns the
        reply's URL. Here the review is the dashboard's own: its replies live on the page."""
        return ""

    def post_review(self, pr, review: ReviewToPost) -> PostedReview | None:
        """Post `review` on the PR; None where the review is the dashboard's own (a local
        repository: it is stored as the PR's review comments and shown on its page)."""
        return None

    def publish_check(self, pr, report: CheckReport) -> PublishedCheck | None:
        """Publish `report` as a check run on the PR's head commit; None where the host has no
        checks (a local repository: the session page's verification panel is the check)."""
        return None

    def merge(self, pr, *, merged_by) -> str:
        """Merge the branch into the base in the mirror, push the base; returns the merge sha."""
        mirror_dir = mirror.mirror_path(self.repository.name)
        try:
            self.remote_git(
                "fetch", "--quiet", "origin", f"+refs/heads/{pr.base}:refs/heads/{pr.base}"
            )
            base = mirror.git("rev-parse", f"refs/heads/{pr.base}", cwd=mirror_dir).strip()
            head = mirror.git("rev-parse", publish_ref(pr.session_id), cwd=mirror_dir).strip()
        except mirror.MirrorError as exc:
            raise CodeHostError(f"reading {pr.base} and the branch failed: {exc}") from None
        if mirror.is_ancestor(mirror_dir, head, base):
            raise AlreadyMerged(f"{pr.branch} is already merged: it is part of {pr.base}")
        try:
            tree = mirror.git("merge-tree", "--write-tree", base, head, cwd=mirror_dir).split()[0]
        except mirror.MirrorError:
            raise CodeHostError(
                f"{pr.branch} conflicts with {pr.base}; ask the agent to rebase it"
            ) from None
        name = merged_by.get_full_name() or merged_by.get_username()
        email = verified_email(merged_by) or f"{merged_by.get_username()}@users.inspect-web.invalid"
        who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}  # fmt: skip
        message = f"Merge {pr.branch} (session {pr.session_id})\n\n{pr.title}\n"
        sha = mirror.git(
            "commit-tree", tree, "-p", base, "-p", head, "-m", message, cwd=mirror_dir, env=who
        ).strip()
        try:
            self.remote_git(*PUSH, "origin", f"{sha}:refs/heads/{pr.base}")
        except mirror.MirrorError as exc:
            raise CodeHostError(f"pushing the merge to {pr.base} failed: {exc}") from None
        mirror.git("update-ref", f"refs/heads/{pr.base}", sha, cwd=mirror_dir)
        return sha


# Each code host an upper layer registers, by kind: asked in turn whether a repository is its
# own (a host for it) or not (None). A repository none claims is a local one.
_HOSTS: dict[str, Callable[[Repository], LocalHost | None]] = {}


def register_code_host(kind: str, host_for: Callable[[Repository], LocalHost | None]) -> None:
    """Add (or replace) the code host `kind`: `host_for(repository)` is its host or None."""
    _HOSTS[kind] = host_for


def code_host_for(repository: Repository, *, read_only: bool = False) -> LocalHost:
    """The repository's code host; `read_only` (a review session's) pushes, opens and merges
    nothing and mints no token that could (ReadOnlySession)."""
    host = None
    for host_for in _HOSTS.values():
        host = host_for(repository)
        if host is not None:
            break
    host = host or LocalHost(repository)
    host.read_only = read_only
    return host
