"""Bare mirrors of repositories, kept by the worker outside every sandbox.

Sandboxes never fetch: builds clone from the mirror, and sessions catch up from it with a git
bundle written into the workspace, so no credentials or network reach the sandbox.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.dispatch import Signal

GIT_TIMEOUT = 600

# A build fetched a repository's mirror (kwargs: repository, mirror_dir): what the fetch brought
# may revert a merged pull request, which sessions notices for a local repository.
mirror_fetched = Signal()


class MirrorError(RuntimeError):
    """git could not fetch or read the repository; the message carries git's own reason."""


class BlobTooLarge(ValueError):
    """A file asked for is larger than the caller takes (`size`: its bytes)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def _git(
    *args: str, cwd: Path | None = None, timeout: int = GIT_TIMEOUT, env: dict | None = None
) -> str:
    result = _run_git(args, cwd=cwd, timeout=timeout, env=env, text=True)
    return result.stdout


def _git_bytes(*args: str, cwd: Path | None = None, timeout: int = GIT_TIMEOUT) -> bytes:
    """_git for output that need not be text (a blob)."""
    return _run_git(args, cwd=cwd, timeout=timeout, env=None, text=False).stdout


def _run_git(
    args: tuple[str, ...], *, cwd: Path | None, timeout: int, env: dict | None, text: bool
) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(settings.DATA_DIR),
        "GIT_TERMINAL_PROMPT": "0",  # never hang waiting for a password
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
        **(env or {}),
    }
    try:
        result = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=text, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise MirrorError(f"git {args[0]} took longer than {timeout} s") from None
    if result.returncode != 0:
        stderr = result.stderr if text else result.stderr.decode(errors="replace")
        raise MirrorError(git_reason(stderr) or f"git exited {result.returncode}")
    return result


def git(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    """git on the worker (mirror side), with git's own reason in a MirrorError on failure."""
    return _git(*args, cwd=cwd, env=env)


def read_blob(mirror: Path, commit: str, path: str, *, max_bytes: int) -> bytes | None:
    """The bytes of `path` at `commit`, read from git objects only (a committed symbolic link
    is its target's name; nothing on the host is followed); None when the mirror has no such
    commit or file; BlobTooLarge when it is larger than `max_bytes`."""
    spec = f"{commit}:{path}"
    try:
        size = int(_git("cat-file", "-s", spec, cwd=mirror).strip())
    except (MirrorError, ValueError):
        return None
    if size > max_bytes:
        raise BlobTooLarge(size)
    try:
        return _git_bytes("cat-file", "blob", spec, cwd=mirror)
    except MirrorError:
        return None


def is_ancestor(repo: Path, commit: str, of: str) -> bool:
    try:
        _git("merge-base", "--is-ancestor", commit, of, cwd=repo)
    except MirrorError:
        return False
    return True


def git_reason(stderr: str) -> str:
    """git's own one-line reason: its first fatal/error line (the rest is advice)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)
    return lines[-1] if lines else ""


def mirror_path(repository_name: str) -> Path:
    return settings.DATA_DIR / "mirrors" / f"{repository_name}.git"


def _source(url: str) -> str:
    # A plain local path is accepted as well as any git URL.
    if "://" not in url and not url.startswith("git@"):
        path = Path(url).expanduser()
        if not path.exists():
            raise MirrorError(f"{url} does not exist")
        return str(path.resolve())
    return url


# Who supplies a repository's fetch credentials (a code host an upper layer registers: GitHub's
# App token): `(repository_name, refresh=...)` -> git's environment, {} when not its repository.
# MirrorError when the host refuses.
_credentials: list[Callable[..., dict[str, str]]] = []


def register_fetch_credentials(provider: Callable[..., dict[str, str]]) -> None:
    if provider not in _credentials:
        _credentials.append(provider)


def fetch_auth_env(repository_name: str, *, refresh: bool = False) -> dict[str, str]:
    """git credentials (as environment) for fetching `repository_name`: the first a registered
    provider gives; none for a local repository."""
    for provider in _credentials:
        env = provider(repository_name, refresh=refresh)
        if env:
            return env
    return {}


def is_auth_failure(git_reason: str) -> bool:
    """git's reason for a push or fetch the remote refused for its credentials."""
    reason = git_reason.lower()
    return any(
        sign in reason
        for sign in ("authentication failed", "could not read username", "error: 401", "error: 403")
    )


def _authenticated(repository_name: str, run):
    """`run(env)` with the credentials of the repository's code host (a GitHub App installation
    token; none for a local repository), retried once with a fresh token if it is refused."""
    try:
        return run(fetch_auth_env(repository_name))
    except MirrorError as exc:
        if not is_auth_failure(str(exc)):
            raise
        return run(fetch_auth_env(repository_name, refresh=True))


def update_mirror(repository_name: str, url: str) -> Path:
    """Create or fetch the bare mirror; raises MirrorError for an unreachable or non-git URL.
    One at a time per mirror (two turns of a repository starting together, on the threads of
    one worker or on two workers of this machine): git refuses concurrent ref updates."""
    lock = mirror_path(repository_name).with_name(f"{repository_name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        return _update_mirror(repository_name, url)


def _update_mirror(repository_name: str, url: str) -> Path:
    path = mirror_path(repository_name)
    if (path / "HEAD").exists():
        _git("remote", "set-url", "origin", _source(url), cwd=path)
        _authenticated(repository_name, lambda env: _git(
            "fetch", "--prune", "--quiet", "origin", "+refs/heads/*:refs/heads/*", cwd=path,
            env=env,
        ))  # fmt: skip
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)

    def clone(env: dict) -> None:
        shutil.rmtree(partial, ignore_errors=True)
        _git("clone", "--mirror", "--quiet", _source(url), str(partial), env=env)

    try:
        _authenticated(repository_name, clone)
    except MirrorError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(path)
    return path


def head_commit(mirror: Path, branch: str) -> str:
    try:
        return _git("rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}", cwd=mirror).strip()
    except MirrorError:
        raise MirrorError(f"branch {branch!r} does not exist in the repository") from None


def checkout(mirror: Path, branch: str, destination: Path) -> str:
    """Clone `branch` from the mirror into `destination` (self-contained); returns the commit."""
    _git("clone", "--quiet", "--branch", branch, "--no-hardlinks", str(mirror), str(destination))
    # The sandbox has no route to the mirror's path; keep a name that says where it came from.
    _git("remote", "set-url", "origin", "inspect-mirror", cwd=destination)
    return _git("rev-parse", "HEAD", cwd=destination).strip()


def path_authors(mirror: Path, commit: str, path: str, *, limit: int = 20) -> list[str]:
    """The author and committer addresses (lower-cased) of the last `limit` commits up to
    `commit` that changed `path`: who wrote a recipe change, for four eyes on its approval.
    Read from git objects only; nothing of the work tree is followed."""
    out = _git("log", f"-{limit}", "--format=%ae%n%ce", commit, "--", path, cwd=mirror)
    return sorted({line.strip().lower() for line in out.splitlines() if line.strip()})


def drift(mirror: Path, base: str, head: str) -> tuple[int, list[str]]:
    """Commits and changed paths between `base` and `head`."""
    if base == head:
        return 0, []
    commits = int(_git("rev-list", "--count", f"{base}..{head}", cwd=mirror).strip() or 0)
    paths = [p for p in _git("diff", "--name-only", base, head, cwd=mirror).splitlines() if p]
    return commits, paths


def bundle(mirror: Path, base: str, head: str, branch: str) -> bytes:
    """A git bundle with the commits from `base` to `head`, to be fetched inside a sandbox."""
    tmp = mirror / f"inspect-{base[:12]}-{head[:12]}.bundle"
    try:
        # A temporary branch name so the bundle carries a ref the sandbox can fetch.
        _git("bundle", "create", str(tmp), f"{base}..refs/heads/{branch}", cwd=mirror)
        return tmp.read_bytes()
    finally:
        tmp.unlink(missing_ok=True)
