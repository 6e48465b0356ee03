"""GitHub as a session's code host: a GitHub App, PRs opened as the prompting user where they
have a token. Registered with sessions (`code_host_for`) and with the mirror (fetch credentials)
by the integrations app, so neither imports this module.

Everything here runs on the worker, outside the sandbox: credentials never reach a sandbox.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice

import httpx
from allauth.socialaccount.models import SocialToken
from django.db import transaction
from github import (
    Auth,
    BadCredentialsException,
    Github,
    GithubException,
    GithubIntegration,
)
from github.GithubObject import NotSet

from inspect_web.sealing import SecretsUnavailable
from integrations.github import app_settings
from integrations.github.models import GitHubLink
from sessions.codehosts import (
    AlreadyMerged,
    CheckReport,
    CodeHostError,
    LocalHost,
    OpenedPull,
    PostedReview,
    PublishedCheck,
    ReviewToPost,
    git_auth_env,
)
from snapshots import mirror
from snapshots.models import Repository

# Only what publishing needs: push the branch, open and merge the pull request.
APP_PERMISSIONS = {"contents": "write", "pull_requests": "write"}
# Only what CI feedback needs: read failed checks' output, publish the `Inspect / verify` check.
CHECKS_PERMISSIONS = {"checks": "write"}
# Only what the review agent's review needs: post it on the pull request.
REVIEW_PERMISSIONS = {"pull_requests": "write"}
TOKEN_MARGIN_S = 120  # refresh an installation token this long before it expires
MAX_ANNOTATIONS = 20  # of a failed check run, in its excerpt


def app_auth() -> Auth.AppAuth:
    """The App's JWT authentication, with the id and key in force."""
    return Auth.AppAuth(int(app_settings.app_id()), app_settings.private_key())


class GitHubHost(LocalHost):
    """GitHub through PyGithub, as the App: an installation token per repository, scoped to it
    with only contents and pull-requests write, minted on the worker and never given to a
    sandbox. A token GitHub no longer accepts is replaced once; a second refusal is an error."""

    name = "github"
    # (API URL, owner/name[, permissions]) -> (token, expiry as epoch seconds); per worker
    # process. A token for another purpose than publishing is keyed by its permissions too.
    _tokens: dict[tuple[str, ...], tuple[str, float]] = {}

    def __init__(self, repository: Repository) -> None:
        super().__init__(repository)
        self.link = repository.github
        self.owner, _, self.repo_name = self.link.full_name.partition("/")

    # -- App authentication ------------------------------------------------------------
    def _app_auth(self) -> Auth.AppAuth:
        try:
            configured = app_settings.app_configured()
        except SecretsUnavailable as exc:  # stored by Connect GitHub, unreadable with this key
            raise CodeHostError(f"the GitHub App's private key cannot be read: {exc}") from None
        if not configured:
            raise CodeHostError(
                f"{self.repository.name} is linked to GitHub ({self.link.full_name}) but no "
                "GitHub App is configured: connect one in Settings → GitHub, or set GITHUB_APP_ID "
                "and GITHUB_APP_PRIVATE_KEY"
            )
        return app_auth()

    def _installation_id(self) -> int:
        if self.link.installation_id:
            return self.link.installation_id
        integration = GithubIntegration(auth=self._app_auth(), base_url=app_settings.api_url())
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

    def token(self, *, refresh: bool = False, permissions: dict | None = None) -> str:
        """An installation token for this one repository (contents and pull requests write, or
        `permissions`), reused until shortly before it expires. CodeHostError when GitHub
        refuses one."""
        permissions = permissions or APP_PERMISSIONS
        if permissions.get("contents") == "write":
            self.refuse_if_read_only("a contents-write token")
        key: tuple[str, ...] = (app_settings.api_url(), self.link.full_name.lower())
        if permissions != APP_PERMISSIONS:
            key += (json.dumps(permissions, sort_keys=True),)
        cached = self._tokens.get(key)
        if cached and not refresh and cached[1] - TOKEN_MARGIN_S > time.time():
            return cached[0]
        self._tokens.pop(key, None)
        jwt = self._app_auth().create_jwt()
        installation = self._installation_id()
        url = f"{app_settings.api_url()}/app/installations/{installation}/access_tokens"
        try:
            # PyGithub cannot limit a token to chosen repositories (PITFALLS.md): ask directly.
            response = httpx.post(
                url,
                headers={
                    "Authorization": f"Bearer {jwt}",
                    "Accept": "application/vnd.github+json",
                    "X-GitHub-Api-Version": "2022-11-28",
                },
                json={"repositories": [self.repo_name], "permissions": permissions},
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
            if not mirror.is_auth_failure(str(exc)):
                raise
        try:
            return mirror.git(
                *args,
                cwd=mirror.mirror_path(self.repository.name),
                env=git_auth_env(self.token(refresh=True)),
            )
        except mirror.MirrorError as exc:
            if mirror.is_auth_failure(str(exc)):
                raise CodeHostError(self._refused_twice()) from None
            raise

    def _refused_twice(self) -> str:
        return (
            f"GitHub refused the App's installation token for {self.link.full_name} even "
            "after a fresh one was minted (401 Bad credentials); check GITHUB_APP_ID, "
            "GITHUB_APP_PRIVATE_KEY and the App's installation, then send another prompt"
        )

    def _repo(self, token: str):
        client = Github(
            auth=Auth.Token(token), base_url=app_settings.api_url(), retry=None, lazy=True
        )
        return client.get_repo(self.link.full_name)

    def _with_app(self, call, *, permissions: dict | None = None):
        """`call(repo)` as the App; a token GitHub calls bad credentials is replaced once."""
        try:
            return call(self._repo(self.token(permissions=permissions)))
        except BadCredentialsException:
            pass
        try:
            return call(self._repo(self.token(refresh=True, permissions=permissions)))
        except BadCredentialsException:
            raise CodeHostError(self._refused_twice()) from None

    # -- pull requests -----------------------------------------------------------------
    def open_pull(self, *, branch: str, base: str, title: str, body: str, author) -> OpenedPull:
        """Open the PR as `author` (their own GitHub token) or else as the App, flagged; adopt
        the one a previous attempt opened rather than open a second."""
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
        try:
            self._with_app(lambda repo: repo.get_pull(pr.number).edit(body=body))
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused to update #{pr.number}'s description ({exc.status}: "
                f"{_message(exc)})"
            ) from None

    def review_comments(self, pr, review_id: int) -> list[dict]:
        """The line comments of one review of `pr`, in GitHub's REST shape
        (GET /repos/{o}/{r}/pulls/{n}/reviews/{id}/comments, every page). CodeHostError when
        GitHub cannot be asked or refuses."""
        path = f"/repos/{self.link.full_name}/pulls/{pr.number}/reviews/{int(review_id)}/comments"
        return self._list(path)

    def _list(self, path: str) -> list[dict]:
        """Every page of a REST list as the App; a refused token is replaced once. (Directly:
        PyGithub's list items fetch each item again when their raw data is read.)"""
        items: list[dict] = []
        url: str | None = f"{app_settings.api_url()}{path}?per_page=100"
        while url:
            response = self._get(url)
            if response.status_code == 401:
                response = self._get(url, refresh=True)
                if response.status_code == 401:
                    raise CodeHostError(self._refused_twice())
            try:
                data = response.json() if response.status_code == 200 else None
            except ValueError:
                data = None
            if not isinstance(data, list):
                raise CodeHostError(
                    f"GitHub answered {response.status_code} to GET {path}: "
                    f"{_response_message(response)}"
                )
            items += data
            url = response.links.get("next", {}).get("url")
        return items

    def _get(self, url: str, *, refresh: bool = False) -> httpx.Response:
        headers = {
            "Authorization": f"token {self.token(refresh=refresh)}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        try:
            return httpx.get(url, headers=headers, timeout=30)
        except httpx.HTTPError as exc:
            raise CodeHostError(f"GitHub could not be reached: {exc}") from None

    def post_review(self, pr, review: ReviewToPost) -> PostedReview:
        """POST /repos/{o}/{r}/pulls/{n}/reviews (event COMMENT, line comments on the RIGHT
        side) with a token scoped to pull_requests:write. CodeHostError when GitHub refuses."""
        url = f"{app_settings.api_url()}/repos/{self.link.full_name}/pulls/{pr.number}/reviews"
        payload = {
            "commit_id": review.commit, "body": review.body, "event": "COMMENT",
            "comments": [{"path": path, "line": line, "side": "RIGHT", "body": body}
                         for path, line, body in review.comments],
        }  # fmt: skip
        response = None
        for refresh in (False, True):  # a token GitHub calls bad credentials is replaced once
            token = self.token(refresh=refresh, permissions=REVIEW_PERMISSIONS)
            try:
                response = httpx.post(
                    url,
                    headers={"Authorization": f"Bearer {token}",
                             "Accept": "application/vnd.github+json",
                             "X-GitHub-Api-Version": "2022-11-28"},
                    json=payload,
                    timeout=30,
                )  # fmt: skip
            except httpx.HTTPError as exc:
                raise CodeHostError(
                    f"GitHub could not be reached to post the review: {exc}"
                ) from None
            if response.status_code != 401:
                break
        if response is None or response.status_code == 401:
            raise CodeHostError(self._refused_twice())
        if response.status_code != 200:
            raise CodeHostError(
                f"GitHub refused the review of #{pr.number} ({response.status_code}: "
                f"{_response_message(response)})"
            )
        data = response.json()
        return PostedReview(id=str(data.get("id", "")), url=data.get("html_url") or "")

    def reply_to_review_comment(self, pr, comment_id: str, body: str) -> str:
        """POST /repos/{o}/{r}/pulls/{n}/comments/{comment_id}/replies, as the App."""
        try:
            reply = self._with_app(
                lambda repo: repo.get_pull(pr.number).create_review_comment_reply(
                    int(comment_id), body
                )
            )
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused the reply to review comment {comment_id} on #{pr.number} "
                f"({exc.status}: {_message(exc)})"
            ) from None
        return reply.html_url or ""

    def merge(self, pr, *, merged_by) -> str:
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

    # -- checks ------------------------------------------------------------------------
    def check_run_output(self, check_run_id: int) -> CheckRunOutput:
        """A check run's name, output and first annotations, read as the App with a token
        that may only read and write checks. CodeHostError when GitHub refuses."""

        def read(repo) -> CheckRunOutput:
            run = repo.get_check_run(check_run_id)
            output = run.output
            annotations = [
                f"{a.path}:{a.start_line}: {a.annotation_level}: {a.message}"
                for a in islice(run.get_annotations(), MAX_ANNOTATIONS)
            ]
            return CheckRunOutput(
                name=run.name, conclusion=run.conclusion or "", url=run.html_url or "",
                title=output.title or "", summary=output.summary or "", text=output.text or "",
                annotations=annotations, suite=run.check_suite.id if run.check_suite else None,
            )  # fmt: skip

        try:
            return self._with_app(read, permissions=CHECKS_PERMISSIONS)
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused check run {check_run_id} of {self.link.full_name} "
                f"({exc.status}: {_message(exc)})"
            ) from None

    def check_runs_of(self, sha: str) -> list[tuple[int, str, str, int | None]]:
        """The latest check runs on commit `sha`: (id, name, conclusion, check suite id)."""

        def read(repo):
            return [
                (run.id, run.name, run.conclusion or "",
                 run.check_suite.id if run.check_suite else None)
                for run in repo.get_commit(sha).get_check_runs(filter="latest")
            ]  # fmt: skip

        try:
            return self._with_app(read, permissions=CHECKS_PERMISSIONS)
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused the check runs of {sha[:12]} in {self.link.full_name} "
                f"({exc.status}: {_message(exc)})"
            ) from None

    def publish_check(self, pr, report: CheckReport) -> PublishedCheck:
        """Create `report` as a completed check run on its head commit, or update the one this
        session published there already (same name and external id)."""

        def publish(repo) -> PublishedCheck:
            fields = {
                "details_url": report.details_url, "external_id": report.external_id,
                "status": "completed", "conclusion": report.conclusion,
                "completed_at": datetime.now(UTC),
                "output": {"title": report.title, "summary": report.summary,
                           "text": report.text},
            }  # fmt: skip
            runs = repo.get_commit(report.head).get_check_runs(check_name=report.name)
            mine = next((r for r in runs if r.external_id == report.external_id), None)
            if mine is not None:
                mine.edit(**fields)
            else:
                mine = repo.create_check_run(report.name, report.head, **fields)
            return PublishedCheck(mine.id, mine.html_url or "")

        try:
            return self._with_app(publish, permissions=CHECKS_PERMISSIONS)
        except GithubException as exc:
            raise CodeHostError(
                f"GitHub refused the {report.name} check run on {report.head[:12]} "
                f"({exc.status}: {_message(exc)}); the App needs the Checks (write) permission"
            ) from None


@dataclass(frozen=True)
class CheckRunOutput:
    name: str
    conclusion: str
    url: str
    title: str
    summary: str
    text: str
    annotations: list[str]
    suite: int | None


def _message(exc) -> str:
    data = getattr(exc, "data", None)
    return str(data.get("message", "")) if isinstance(data, dict) else str(data or "")


def _response_message(response) -> str:
    try:
        return str(response.json().get("message", ""))
    except ValueError:
        return response.text[:200]


def github_host_for(repository: Repository) -> GitHubHost | None:
    """The repository's GitHub host when it is linked to GitHub (sessions' code-host registry
    asks this), else None."""
    try:
        repository.github  # noqa: B018 - the one-to-one says whether it is on GitHub
    except GitHubLink.DoesNotExist:
        return None
    return GitHubHost(repository)


def fetch_auth_env(repository_name: str, *, refresh: bool = False) -> dict[str, str]:
    """git credentials (as environment) for fetching `repository_name` into its mirror: an
    installation token for a repository on GitHub with the App configured, else none.
    MirrorError when GitHub refuses a token."""
    repository = Repository.objects.filter(name=repository_name).first()
    if repository is None or not app_settings.app_id():
        return {}
    host = github_host_for(repository)
    if host is None:
        return {}
    try:
        return git_auth_env(host.token(refresh=refresh))
    except CodeHostError as exc:
        raise mirror.MirrorError(str(exc)) from None


def _user_github_token(user) -> str | None:
    """The user's own GitHub token from their allauth GitHub login, if they have one."""
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


def repository_link_github(*, repository: Repository, full_name: str) -> GitHubLink:
    """Link `repository` to `full_name` on GitHub and check the App can reach it (a scoped
    token, then `git ls-remote` with it). CodeHostError, with nothing saved, when it cannot."""
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
        GitHubHost._tokens.pop((app_settings.api_url(), link.full_name.lower()), None)
        token = host.token()
        try:
            mirror.git("ls-remote", "--heads", repository.url, repository.default_branch,
                       env=git_auth_env(token))  # fmt: skip
        except mirror.MirrorError as exc:
            raise CodeHostError(
                f"the App's token for {link.full_name} cannot read {repository.url}: {exc}"
            ) from None
    return link
