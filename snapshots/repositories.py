"""Adding, re-branching and archiving a repository: the one set of actions behind `inspect
repo`, the settings page and the REST API. The URL is checked with git before anything is
saved, and the default branch is the remote's own (`git ls-remote --symref HEAD`) unless one is
given."""

from __future__ import annotations

import subprocess

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import Membership, Role
from approvals import audit
from snapshots import mirror
from snapshots.models import Repository

LS_REMOTE_SECONDS = 60
_GIT_ENV = {"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0"}


class RepositoryRefused(Exception):
    """The repository cannot be added; the message says why, for a form, the API or the CLI.
    `field` names the input at fault ("name", "url", "branch")."""

    def __init__(self, message: str, *, field: str = "url") -> None:
        super().__init__(message)
        self.field = field


def _ls_remote(
    source: str, options: list[str], pattern: str, *, auth_env: dict[str, str] | None
) -> str:
    url = source
    try:
        done = subprocess.run(
            ["git", "ls-remote", *options, source, pattern],
            check=True,
            capture_output=True,
            timeout=LS_REMOTE_SECONDS,
            env={**_GIT_ENV, **(auth_env or {})},
        )
    except subprocess.CalledProcessError as exc:
        reason = mirror.git_reason((exc.stderr or b"").decode(errors="replace"))
        if exc.returncode == 2 and not reason:
            raise RepositoryRefused(f"{url} has no branch {pattern!r}", field="branch") from None
        raise RepositoryRefused(
            f"cannot read {url}: {reason or 'it is not a git repository'}"
        ) from None
    except subprocess.TimeoutExpired:
        raise RepositoryRefused(f"cannot reach {url} within {LS_REMOTE_SECONDS} s") from None
    return done.stdout.decode(errors="replace")


def _source(url: str) -> str:
    try:
        return mirror._source(url)
    except mirror.MirrorError as exc:
        raise RepositoryRefused(f"cannot use {url}: {exc}") from None


def detect_default_branch(url: str, *, auth_env: dict[str, str] | None = None) -> str:
    """The branch the remote's HEAD points at ("master", "main", "trunk", …).
    RepositoryRefused for a URL that is not a readable git repository or has no HEAD."""
    listing = _ls_remote(_source(url), ["--symref"], "HEAD", auth_env=auth_env)
    for line in listing.splitlines():
        # "ref: refs/heads/master\tHEAD"
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            return line.removeprefix("ref: refs/heads/").removesuffix("\tHEAD")
    raise RepositoryRefused(
        f"{url} has no default branch (an empty repository?); push a first commit or name the "
        "branch",
        field="branch",
    )


def check_branch(url: str, branch: str, *, auth_env: dict[str, str] | None = None) -> None:
    """RepositoryRefused unless `branch` exists at `url`."""
    _ls_remote(_source(url), ["--exit-code", "--heads"], branch, auth_env=auth_env)


def repository_add(
    *,
    name: str,
    url: str,
    by,
    branch: str | None = None,
    members: list[tuple[object, str]] | None = None,
    auth_env: dict[str, str] | None = None,
) -> Repository:
    """Add a repository after checking it with git; nothing is saved if it is refused.

    `branch` None: the remote's default branch. `members` (user, role) pairs; none given: every
    site superuser becomes an admin. `auth_env`: git credentials for a host that needs them
    (the GitHub App's installation token). Audited as `repository.add`."""
    name = name.strip()
    url = url.strip()
    if Repository.objects.filter(name=name).exists():
        raise RepositoryRefused(f"a repository named {name!r} already exists", field="name")
    candidate = Repository(name=name, url=url, default_branch=branch or "main")
    try:
        candidate.full_clean()
    except ValidationError as exc:
        field, problems = next(iter(exc.message_dict.items()))
        raise RepositoryRefused(f"{field}: {problems[0]}", field=field) from None
    if branch:
        check_branch(url, branch, auth_env=auth_env)
    else:
        candidate.default_branch = detect_default_branch(url, auth_env=auth_env)
    if members is None:
        users = Membership.user.field.related_model.objects
        members = [(user, Role.ADMIN) for user in users.filter(is_superuser=True)]
    with transaction.atomic():
        candidate.save()
        for user, role in members:
            Membership.objects.get_or_create(
                user=user, repository=candidate, defaults={"role": role}
            )
        audit.record(
            "repository.add",
            actor=by,
            repository=candidate,
            object_type="repository",
            object_id=candidate.pk,
            data={
                "url": url,
                "default_branch": candidate.default_branch,
                "branch_detected": not branch,
                "members": [[u.get_username(), r] for u, r in members],
            },
        )
    return candidate


def repository_set_branch(
    repository: Repository, branch: str, *, by, auth_env: dict[str, str] | None = None
) -> Repository:
    """Make `branch` the branch new sessions and builds start from, once git shows it exists
    at the repository's URL. Audited as `repository.branch` (old and new)."""
    branch = branch.strip()
    if not branch:
        raise RepositoryRefused("name a branch", field="branch")
    check_branch(repository.url, branch, auth_env=auth_env)
    with transaction.atomic():
        locked = Repository.objects.select_for_update().get(pk=repository.pk)
        before = locked.default_branch
        if before == branch:
            return locked
        locked.default_branch = branch
        locked.save(update_fields=["default_branch"])
        audit.record(
            "repository.branch",
            actor=by,
            repository=locked,
            object_type="repository",
            object_id=locked.pk,
            data={"from": before, "to": branch},
        )
    repository.default_branch = branch
    return locked


def repository_archive(repository: Repository, *, by, undo: bool = False) -> Repository:
    """Archive (or, with `undo`, unarchive) a repository: an archived one takes no new sessions
    and no scheduled refreshes and is hidden from New task and the dashboard, while its history
    stays. Audited as `repository.archive` / `repository.unarchive`; a no-op is not."""
    with transaction.atomic():
        locked = Repository.objects.select_for_update().get(pk=repository.pk)
        if (locked.archived_at is None) == undo:
            return locked
        locked.archived_at = None if undo else timezone.now()
        locked.save(update_fields=["archived_at"])
        audit.record(
            "repository.unarchive" if undo else "repository.archive",
            actor=by,
            repository=locked,
            object_type="repository",
            object_id=locked.pk,
            data={},
        )
    repository.archived_at = locked.archived_at
    return locked


def archived_refusal(repository: Repository) -> str | None:
    """Why nothing new may start in `repository` (None if it is not archived)."""
    if repository.archived_at is None:
        return None
    return (
        f"{repository.name} is archived: it takes no new sessions; an admin can unarchive it "
        "in Settings › Repositories"
    )
