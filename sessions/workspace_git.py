"""Git inside the sandbox: one commit per turn, attributed, and the diff against the base."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from inspect_web.text import cut
from sessions.agents.base import Author
from snapshots.sandbox import Sandbox, SandboxError

AGENT_CO_AUTHOR = "Inspect agent <agent@inspect-web.invalid>"
MAX_PATCH = 48 * 1024
# The workspace belongs to another uid inside the user namespace; trust it explicitly.
GIT = "git -c safe.directory=* -c core.quotePath=false"


@dataclass(frozen=True)
class FileDiff:
    path: str
    added: int
    removed: int
    binary: bool
    patch: str


def commit_turn(
    sandbox: Sandbox,
    *,
    author: Author,
    message: str,
    co_authors: Sequence[str] = (AGENT_CO_AUTHOR,),
) -> str | None:
    """Commit everything changed in the workspace as `author` (a turn: with the agent as
    co-author); returns the new commit, or None when nothing changed."""
    trailers = "".join(f"\nCo-authored-by: {who}" for who in co_authors)
    body = f"{message.strip()[:2000]}\n{trailers}\n"
    env = {
        "GIT_AUTHOR_NAME": author.name,
        "GIT_AUTHOR_EMAIL": author.email,
        "GIT_COMMITTER_NAME": author.name,
        "GIT_COMMITTER_EMAIL": author.email,
    }
    result = sandbox.run(
        f"{GIT} add -A && if {GIT} diff --cached --quiet; then echo NOCHANGE; else "
        f"{GIT} commit --quiet --no-verify -m {shlex.quote(body)} && {GIT} rev-parse HEAD; fi",
        cwd="/workspace",
        env=env,
        timeout=120,
    )
    if not result.ok:
        raise SandboxError(f"committing the changes failed: {result.stderr.strip()[-400:]}")
    out = result.stdout.strip().splitlines()
    return None if not out or out[-1] == "NOCHANGE" else out[-1]


def paths_changed_by(sandbox: Sandbox, commit: str) -> set[str]:
    """The paths `commit` changed since its parent, named as diff_against names them."""
    commit = shlex.quote(commit)
    result = sandbox.run(f"{GIT} diff --numstat {commit}^ {commit}", cwd="/workspace", timeout=120)
    if not result.ok:
        raise SandboxError(f"reading what {commit} changed failed: {result.stderr[-400:]}")
    return {p[2] for line in result.stdout.splitlines() if len(p := line.split("\t", 2)) == 3}


def diff_against(sandbox: Sandbox, base: str) -> list[FileDiff]:
    """Per-file diff of the workspace (committed and not) against `base`."""
    numstat = sandbox.run(
        f"{GIT} diff --numstat {shlex.quote(base)}", cwd="/workspace", timeout=120
    )
    if not numstat.ok:
        raise SandboxError(f"computing the diff failed: {numstat.stderr.strip()[-400:]}")
    patch = sandbox.run(f"{GIT} diff {base}", cwd="/workspace", timeout=120)
    patches = _split_patches(patch.stdout)
    files = []
    for line in numstat.stdout.splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        added, removed, path = parts
        binary = added == "-"
        text = patches.get(path, "")
        files.append(
            FileDiff(
                path=path,
                added=0 if binary else int(added),
                removed=0 if binary else int(removed),
                binary=binary,
                patch=cut(text, MAX_PATCH, 0).joined("\n… (truncated)\n"),
            )
        )
    return files


def _split_patches(text: str) -> dict[str, str]:
    patches: dict[str, str] = {}
    current: list[str] = []
    path = None
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            if path is not None:
                patches[path] = "".join(current)
            current = [line]
            path = line.rstrip("\n").split(" b/", 1)[-1]
        else:
            current.append(line)
    if path is not None:
        patches[path] = "".join(current)
    return patches
