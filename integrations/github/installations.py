"""The repositories the GitHub App's installations can read, and adding one of them: the same
`repository_add` as `inspect repo add` (default branch detected, with an installation token
for git) and the same link as `inspect github link`, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import httpx
import jwt
from django.db import transaction

from approvals import audit
from inspect_web.sealing import SecretsUnavailable
from integrations.github import app_settings
from integrations.github.codehost import APP_PERMISSIONS, app_auth, repository_link_github
from sessions.codehosts import CodeHostError, git_auth_env
from snapshots.models import Repository
from snapshots.repositories import RepositoryRefused, repository_add

API_SECONDS = 30
MAX_PAGES = 10  # 1,000 repositories per installation are listed; more is a GitHub search's job
HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
LISTING_PERMISSIONS = {"metadata": "read"}  # enough to list, nothing more


class InstallationsUnavailable(Exception):
    """GitHub could not be asked; the message says why, for the page."""


@dataclass(frozen=True)
class InstalledRepository:
    installation_id: int
    full_name: str
    name: str
    clone_url: str
    default_branch: str
    private: bool
    added_as: str = ""  # the local repository already linked to it, if any


@dataclass
class Installation:
    id: int
    account: str
    html_url: str
    repositories: list[InstalledRepository] = field(default_factory=list)
    error: str = ""


def _get(url: str, *, auth: str, what: str) -> httpx.Response:
    try:
        response = httpx.get(url, headers={**HEADERS, "Authorization": auth}, timeout=API_SECONDS)
    except httpx.HTTPError as exc:
        raise InstallationsUnavailable(f"GitHub could not be reached for {what}: {exc}") from None
    if response.status_code != 200:
        raise InstallationsUnavailable(
            f"GitHub answered {response.status_code} for {what}: {_message(response)}"
        )
    return response


def _pages(url: str, *, auth: str, what: str, key: str | None) -> list[dict]:
    items: list[dict] = []
    for _ in range(MAX_PAGES):
        response = _get(url, auth=auth, what=what)
        data = response.json()
        items.extend(data[key] if key else data)
        following = response.links.get("next", {}).get("url")
        if not following:
            break
        url = following
    return items


def _jwt() -> str:
    if not app_settings.app_configured():
        raise InstallationsUnavailable(
            "no GitHub App is configured: connect one on this page, or set GITHUB_APP_ID and "
            "GITHUB_APP_PRIVATE_KEY"
        )
    try:
        return f"Bearer {app_auth().create_jwt()}"
    except (ValueError, TypeError, jwt.PyJWTError, SecretsUnavailable) as exc:  # bad id or key
        raise InstallationsUnavailable(
            f"the GitHub App's id and private key cannot make a token ({exc}); connect the App "
            "again or fix GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY"
        ) from None


def _token(installation_id: int, body: dict, *, what: str) -> str:
    url = f"{app_settings.api_url()}/app/installations/{installation_id}/access_tokens"
    try:
        response = httpx.post(
            url, headers={**HEADERS, "Authorization": _jwt()}, json=body, timeout=API_SECONDS
        )
    except httpx.HTTPError as exc:
        raise InstallationsUnavailable(f"GitHub could not be reached for {what}: {exc}") from None
    if response.status_code != 201:
        raise InstallationsUnavailable(
            f"GitHub refused a token for {what} ({response.status_code}: {_message(response)})"
        )
    return response.json()["token"]


def _repositories(installation_id: int) -> list[InstalledRepository]:
    what = f"installation {installation_id}'s repositories"
    token = _token(installation_id, {"permissions": LISTING_PERMISSIONS}, what=what)
    items = _pages(
        f"{app_settings.api_url()}/installation/repositories?per_page=100",
        auth=f"token {token}",
        what=what,
        key="repositories",
    )
    return [
        InstalledRepository(
            installation_id=installation_id,
            full_name=item["full_name"],
            name=item["name"],
            clone_url=item["clone_url"],
            default_branch=item.get("default_branch") or "",
            private=bool(item.get("private")),
        )
        for item in items
    ]


@dataclass(frozen=True)
class AppOnGitHub:
    name: str
    owner: str
    html_url: str


def the_app() -> AppOnGitHub:
    """What GitHub says about the App in force (`GET /app`), for the settings page."""
    data = _get(f"{app_settings.api_url()}/app", auth=_jwt(), what="the App").json()
    return AppOnGitHub(
        name=data.get("name", ""),
        owner=(data.get("owner") or {}).get("login", ""),
        html_url=data.get("html_url", ""),
    )


def installations() -> list[Installation]:
    """The App's installations with the repositories each can read (an installation GitHub
    will not list carries its error). InstallationsUnavailable when the App cannot be asked."""
    found = []
    linked = {
        full_name.lower(): name
        for full_name, name in Repository.objects.filter(github__isnull=False).values_list(
            "github__full_name", "name"
        )
    }
    for item in _pages(
        f"{app_settings.api_url()}/app/installations?per_page=100",
        auth=_jwt(),
        what="the App's installations",
        key=None,
    ):
        installation = Installation(
            id=int(item["id"]),
            account=(item.get("account") or {}).get("login", ""),
            html_url=item.get("html_url", ""),
        )
        try:
            installation.repositories = [
                replace(r, added_as=linked.get(r.full_name.lower(), ""))
                for r in _repositories(installation.id)
            ]
        except InstallationsUnavailable as exc:
            installation.error = str(exc)
        found.append(installation)
    return found


def _installation_of(full_name: str) -> int:
    """The App's installation on `full_name`; RepositoryRefused when it is not installed."""
    url = f"{app_settings.api_url()}/repos/{full_name}/installation"
    try:
        auth = _jwt()
        response = httpx.get(url, headers={**HEADERS, "Authorization": auth}, timeout=API_SECONDS)
    except (InstallationsUnavailable, httpx.HTTPError) as exc:
        raise RepositoryRefused(f"cannot ask GitHub about {full_name}: {exc}") from None
    if response.status_code != 200:
        raise RepositoryRefused(
            f"the GitHub App is not installed on {full_name} ({response.status_code}: "
            f"{_message(response)}); install it there, or give it access to this repository",
            field="full_name",
        )
    return int(response.json()["id"])


def add_and_link(
    *,
    name: str,
    full_name: str,
    url: str,
    by,
    branch: str | None = None,
    installation_id: int | None = None,
) -> Repository:
    """Add repository `name` from `url`, which is `full_name` on GitHub, and link it there, in
    one transaction: git reads it with an installation token for that one repository (so the
    default branch is detected when `branch` is None). RepositoryRefused, nothing saved, when
    it cannot be. The settings page and `inspect github link` both add through here."""
    owner, _, repo_name = full_name.strip().strip("/").removesuffix(".git").partition("/")
    if not owner or not repo_name or "/" in repo_name:
        raise RepositoryRefused(f"{full_name!r} is not OWNER/NAME", field="full_name")
    full_name = f"{owner}/{repo_name}"
    if installation_id is None:
        installation_id = _installation_of(full_name)
    try:
        token = _token(
            installation_id,
            {"repositories": [repo_name], "permissions": APP_PERMISSIONS},
            what=full_name,
        )
    except InstallationsUnavailable as exc:
        raise RepositoryRefused(str(exc), field="full_name") from None
    with transaction.atomic():
        repository = repository_add(
            name=name, url=url, by=by, branch=branch, auth_env=git_auth_env(token)
        )
        try:
            link = repository_link_github(repository=repository, full_name=full_name)
        except CodeHostError as exc:
            raise RepositoryRefused(str(exc), field="full_name") from None
        audit.record(
            "github.link",
            actor=by,
            repository=repository,
            object_type="repository",
            object_id=repository.pk,
            data={"full_name": link.full_name, "installation_id": link.installation_id},
        )
    return repository


def add_installed_repository(*, installation_id: int, full_name: str, name: str, by) -> Repository:
    """Add `full_name`, which installation `installation_id` can read (as GitHub lists it), as
    repository `name` linked to it; RepositoryRefused, with nothing saved, when it cannot be."""
    try:
        listed = _repositories(installation_id)
    except InstallationsUnavailable as exc:
        raise RepositoryRefused(str(exc), field="full_name") from None
    chosen = next((r for r in listed if r.full_name.lower() == full_name.lower()), None)
    if chosen is None:
        raise RepositoryRefused(
            f"the GitHub App's installation {installation_id} cannot read {full_name}; give it "
            "access to that repository on GitHub first",
            field="full_name",
        )
    return add_and_link(
        name=name,
        full_name=chosen.full_name,
        url=chosen.clone_url,
        by=by,
        installation_id=installation_id,
    )


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    return str(data.get("message", "")) if isinstance(data, dict) else str(data)[:200]
