"""Where a session's branch goes: a local repository (a path or bare repo, reviewed and merged in
the dashboard) or GitHub (a GitHub App; PRs opened as the prompting user where they have a token).

Everything here runs on the worker, outside the sandbox: credentials never reach a sandbox. The
session's commits leave the sandbox as a git bundle, are fetched into the repository's mirror and
pushed from there.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings

from accounts.identity import verified_email
from snapshots import mirror
from snapshots.models import Repository

# Only what publishing needs: push the branch, open and merge the pull request.
APP_PERMISSIONS = {"contents": "write", "pull_requests": "write"}
TOKEN_MARGIN_S = 120  # refresh an installation token this long before it expires
# The mirror is a `clone --mirror` (remote.origin.mirror=true), which refuses explicit refspecs.
PUSH = ("-c", "remote.origin.mirror=false", "push", "--quiet")


class CodeHostError(RuntimeError):
    """The code host refused or failed; the message is meant for the session's viewers."""


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

    def token(self, *, refresh: bool = False) -> str | None:
        return None

    def remote_git(self, *args: str) -> str:
        """git against the repository's remote, from the mirror, with the host's credentials."""
        mirror_dir = mirror.mirror_path(self.repository.name)
        return mirror.git(*args, cwd=mirror_dir, env=git_auth_env(self.token()))

    def push(self, session_id: int, branch: str) -> None:
        """Push the session's commits to `branch`, never by force: BranchTaken when the remote
        branch holds commits this session did not make (someone else's work is not lost)."""
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


class GitHubHost(LocalHost):
    """GitHub through PyGithub, as the App: an installation token per repository, scoped to it
    with only contents and pull-requests write, minted on the worker and never given to a
    sandbox. A token GitHub no longer accepts is replaced once; a second refusal is an error."""

    name = "github"
    # (API URL, owner/name) -> (token, expiry as epoch seconds); per worker process.
    _tokens: dict[tuple[str, str], tuple[str, float]] = {}

    def __init__(self, repository: Repository) -> None:
        super().__init__(repository)
        self.link = repository.github
        self.owner, _, self.repo_name = self.link.full_name.partition("/")

    # -- App authentication ------------------------------------------------------------
    def _app_auth(self):
        from github import Auth

        if not (settings.GITHUB_APP_ID and settings.GITHUB_APP_PRIVATE_KEY):
            raise CodeHostError(
                f"{self.repository.name} is linked to GitHub ({self.link.full_name}) but no "
                "GitHub App is configured: set GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY"
            )
        return Auth.AppAuth(int(settings.GITHUB_APP_ID), settings.GITHUB_APP_PRIVATE_KEY)

    def _installation_id(self) -> int:
        from github import GithubException, GithubIntegration

        if self.link.installation_id:
            return self.link.installation_id
        integration = GithubIntegration(auth=self._app_auth(), base_url=settings.GITHUB_API_URL)
        try:
            installation = integration.get_repo_installation(self.owner, self.repo_name)
        except GithubException as exc:
            raise CodeHostError(
                f"the GitHub App is not installed on {self.link.full_name} ({exc.status}: "
                f"{_message(exc)}); install it there, or give it access to this repository"
            ) from None
        self.link.installation_id = installation.id
        self.link.save(update_fields=["installation_id"])
        return installation.id

    def token(self, *, refresh: bool = False) -> str:
        """An installation token for this one repository (contents and pull requests write),
        reused until shortly before it expires. CodeHostError when GitHub refuses one."""
        import httpx

        key = (settings.GITHUB_API_URL, self.link.full_name.lower())
        cached = self._tokens.get(key)
        if cached and not refresh and cached[1] - TOKEN_MARGIN_S > time.time():
            return cached[0]
        self._tokens.pop(key, None)
        jwt = self._app_auth().create_jwt()
        installation = self._installation_id()
        url = f"{settings.GITHUB_API_URL}/app/installations/{installation}/access_tokens"
        try:
            # PyGithub cannot limit a token to chosen repositories (PITFALLS.md): ask directly.
            response = httpx.post(
                url,
                headers={
                    "Authorization": f"Bearer {jwt}",
                    "Accept": "application/vnd.github+json",
                    "X-GitHub-Api-Version": "2022-11-28",
                },
                json={"repositories": [self.repo_name], "permissions": APP_PERMISSIONS},
                timeout=30,
            )
        except httpx.HTTPError as exc:
            raise CodeHostError(f"GitHub could not be reached for a token: {exc}") from None
        if response.status_code in (401, 403, 404, 422):
            # Uninstalled, suspended or no longer given this repository: look it up next time.
            self.link.installation_id = None
            self.link.save(update_fields=["installation_id"])
            raise CodeHostError(
                f"GitHub refused an installation token for {self.link.full_name} "
                f"({response.status_code}: {_response_message(response)}); the App may have "
                "been uninstalled or suspended, or lost access to the repository — reinstall "
                "it, then send another prompt"
            )
        if response.status_code != 201:
            raise CodeHostError(
                f"GitHub answered {response.status_code} when asked for an installation token "
                f"for {self.link.full_name}: {_response_message(response)}"
            )
        data = response.json()
        expires = datetime.fromisoformat(data["expires_at"].replace("Z", "+00:00"))
        self._tokens[key] = (data["token"], expires.timestamp())
        return data["token"]

    def remote_git(self, *args: str) -> str:
        """git against GitHub with the installation token; a refused token is replaced once."""
        try:
            return super().remote_git(*args)
        except mirror.MirrorError as exc:
            if not is_auth_failure(str(exc)):
                raise
        try:
            return mirror.git(
                *args,
                cwd=mirror.mirror_path(self.repository.name),
                env=git_auth_env(self.token(refresh=True)),
            )
        except mirror.MirrorError as exc:
            if is_auth_failure(str(exc)):
                raise CodeHostError(self._refused_twice()) from None
            raise

    def _refused_twice(self) -> str:
        return (
            f"GitHub refused the App's installation token for {self.link.full_name} even "
            "after a fresh one was minted (401 Bad credentials); check GITHUB_APP_ID, "
            "GITHUB_APP_PRIVATE_KEY and the App's installation, then send another prompt"
        )

    def _repo(self, token: str):
        from github import Auth, Github

        client = Github(
            auth=Auth.Token(token), base_url=settings.GITHUB_API_URL, retry=None, lazy=True
        )
        return client.get_repo(self.link.full_name)

    def _with_app(self, call):
        """`call(repo)` as the App; a token GitHub calls bad credentials is replaced once."""
        from github import BadCredentialsException

        try:
            return call(self._repo(self.token()))
        except BadCredentialsException:
            pass
        try:
            return call(self._repo(self.token(refresh=True)))
        except BadCredentialsException:
            raise CodeHostError(self._refused_twice()) from None

    # -- pull requests -----------------------------------------------------------------
    def open_pull(self, *, branch: str, base: str, title: str, body: str, author) -> OpenedPull:
        """Open the PR as `author` (their own GitHub token) or else as the App, flagged; adopt
        the one a previous attempt opened rather than open a second."""
        from github import BadCredentialsException, GithubException

        try:
            existing = self._with_app(
                lambda repo: list(repo.get_pulls(state="all", head=f"{self.owner}:{branch}"))
            )
            if existing:  # a retry after GitHub created it
                pull = existing[0]
                return OpenedPull(pull.number, pull.html_url, opened_as_app=pull.user.type == "Bot")
            user_token = _user_github_token(author)
            if user_token:
                try:
                    pull = self._repo(user_token).create_pull(
                        base=base, head=branch, title=title, body=body
                    )
                    return OpenedPull(pull.number, pull.html_url, opened_as_app=False)
                except BadCredentialsException:
                    pass  # their GitHub login expired or was revoked: open it as the App
            pull = self._with_app(
                lambda repo: repo.create_pull(base=base, head=branch, title=title, body=body)
            )
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused the pull request for {branch} ({exc.status}: {_message(exc)})"
            ) from None
        return OpenedPull(pull.number, pull.html_url, opened_as_app=True)

    def update_pull(self, pr, *, body: str) -> None:
        from github import GithubException

        try:
            self._with_app(lambda repo: repo.get_pull(pr.number).edit(body=body))
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused to update #{pr.number}'s description ({exc.status}: "
                f"{_message(exc)})"
            ) from None

    def merge(self, pr, *, merged_by) -> str:
        from github import GithubException
        from github.GithubObject import NotSet

        def merge(repo):
            pull = repo.get_pull(pr.number)
            if pull.merged:
                raise AlreadyMerged(
                    f"pull request #{pr.number} is already merged", sha=pull.merge_commit_sha or ""
                )
            if pull.state == "closed":
                raise AlreadyMerged(f"pull request #{pr.number} was closed on GitHub", closed=True)
            status = pull.merge(
                merge_method="merge",
                commit_title=f"{pr.title} (#{pr.number})",
                sha=pr.head_sha or NotSet,
            )
            if not status.merged:
                raise CodeHostError(f"GitHub did not merge #{pr.number}: {status.message}")
            return status.sha

        try:
            return self._with_app(merge)
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused to merge #{pr.number} ({exc.status}: {_message(exc)})"
            ) from None


def _message(exc) -> str:
    data = getattr(exc, "data", None)
    return str(data.get("message", "")) if isinstance(data, dict) else str(data or "")


def _response_message(response) -> str:
    try:
        return str(response.json().get("message", ""))
    except ValueError:
        return response.text[:200]


def is_auth_failure(git_reason: str) -> bool:
    """git's reason for a push or fetch the remote refused for its credentials."""
    reason = git_reason.lower()
    return any(
        sign in reason
        for sign in ("authentication failed", "could not read username", "error: 401", "error: 403")
    )


def fetch_auth_env(repository_name: str, *, refresh: bool = False) -> dict[str, str]:
    """git credentials (as environment) for fetching `repository_name` into its mirror: an
    installation token for a repository on GitHub with the App configured, else none.
    MirrorError when GitHub refuses a token."""
    repository = Repository.objects.filter(name=repository_name).first()
    if repository is None:
        return {}
    host = code_host_for(repository)
    if host.name != "github" or not settings.GITHUB_APP_ID:
        return {}
    try:
        return git_auth_env(host.token(refresh=refresh))
    except CodeHostError as exc:
        raise mirror.MirrorError(str(exc)) from None


def _user_github_token(user) -> str | None:
    """The user's own GitHub token from their allauth GitHub login, if they have one."""
    from allauth.socialaccount.models import SocialToken

    if user is None:
        return None
    token = (
        SocialToken.objects.filter(account__user=user, account__provider="github")
        .order_by("-id")
        .first()
    )
    # Stored encrypted; an empty token is one the secrets key no longer decrypts.
    if token is None or not token.token:
        return None
    if token.expires_at and token.expires_at <= datetime.now(UTC):
        return None
    return token.token


def code_host_for(repository: Repository) -> LocalHost:
    from sessions.models import GitHubLink

    try:
        repository.github  # noqa: B018 - the one-to-one says whether it is on GitHub
    except GitHubLink.DoesNotExist:
        return LocalHost(repository)
    return GitHubHost(repository)


def repository_link_github(*, repository: Repository, full_name: str):
    """Link `repository` to `full_name` on GitHub and check the App can reach it (a scoped
    token, then `git ls-remote` with it). CodeHostError, with nothing saved, when it cannot."""
    from django.db import transaction

    from sessions.models import GitHubLink

    owner, _, name = full_name.strip().strip("/").removesuffix(".git").partition("/")
    if not owner or not name or "/" in name:
        raise CodeHostError(f"{full_name!r} is not OWNER/NAME")
    with transaction.atomic():
        link, _ = GitHubLink.objects.update_or_create(
            repository=repository,
            defaults={"full_name": f"{owner}/{name}", "installation_id": None},
        )
        repository.github = link
        host = GitHubHost(repository)
        GitHubHost._tokens.pop((settings.GITHUB_API_URL, link.full_name.lower()), None)
        token = host.token()
        try:
            mirror.git("ls-remote", "--heads", repository.url, repository.default_branch,
                       env=git_auth_env(token))  # fmt: skip
        except mirror.MirrorError as exc:
            raise CodeHostError(
                f"the App's token for {link.full_name} cannot read {repository.url}: {exc}"
            ) from None
    return link
