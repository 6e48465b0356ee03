"""Reviewing a session's diff: which files a reviewer has marked viewed, and a changed file
read whole for context.

Both are per request, never part of the diff panel the live stream renders once for every
viewer (sessions/stream/html_tail.py): the page hands the viewer's own "viewed" marks to the
browser, and the whole file is fetched by the viewer who asks, after the membership check.

A whole file is read from git objects only, never from a work tree: from the repository's
mirror once the session's commits are published there, else inside the session's live
sandbox, else inside a sandbox restored from the session's own snapshot for that one read.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shlex
from dataclasses import dataclass
from functools import partial
from pathlib import PurePosixPath

from django.db import transaction

from approvals.audit import record
from sessions import diff_render
from sessions.models import Event, Prompt, Session, ViewedFile
from sessions.workspace_git import GIT
from snapshots import mirror
from snapshots.backends import sandbox_backend
from snapshots.sandbox import Limits, NetworkPolicy, Sandbox, SandboxError, SandboxGone, SnapshotRef

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
READ_SECONDS = 30  # a restored sandbox for one read lives at most this long


class DiffReviewError(Exception):
    """What a reviewer asked for cannot be given; the message says why and what to do.
    `status` is the HTTP status a view answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def repository_path(path: str) -> str:
    """`path` as a path inside the repository; DiffReviewError when it points outside it
    (absolute, `..`, empty, a NUL byte)."""
    if not path or "\0" in path or len(path) > 4096:
        raise DiffReviewError("Give the file's path inside the repository, like src/app.py.")
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts:
        raise DiffReviewError(
            f"{path} is outside the repository: only files of this session's diff can be read."
        )
    return path


def diff_event(session: Session, path: str, commit: str = "") -> Event:
    """The newest `diff` event of `path` in `session` (of `commit`, when given); DiffReviewError
    (404) when the session's diff has no such file."""
    events = Event.objects.filter(session=session, kind="diff", payload__path=path)
    if commit:
        events = events.filter(payload__commit=commit)
    event = events.order_by("-seq").first()
    if event is None:
        raise DiffReviewError(
            f"{path} is not in this session's diff (it may have changed since the page loaded: "
            "reload it).",
            status=404,
        )
    return event


# -- viewed --------------------------------------------------------------------------------------


def diff_file_mark_viewed(
    *, session: Session, user, path: str, key: str, viewed: bool = True
) -> bool:
    """Mark (or unmark) one version of one file of `session`'s diff as viewed by `user`.
    `key` names the version (sessions.diff_render.file_key); a key that is not one of the
    session's diff files is refused (DiffReviewError), so nothing arbitrary is stored."""
    path = repository_path(path)
    candidates = Event.objects.filter(session=session, kind="diff", payload__path=path)
    known = any(
        diff_render.file_key(path, event.payload.get("patch", "")) == key
        for event in candidates.order_by("-seq")[:50]
    )
    if not known:
        raise DiffReviewError(
            f"This version of {path} is not in this session's diff any more: reload the page.",
            status=404,
        )
    with transaction.atomic():
        if viewed:
            ViewedFile.objects.get_or_create(
                session=session, user=user, key=key, defaults={"path": path}
            )
        else:
            ViewedFile.objects.filter(session=session, user=user, key=key).delete()
    return viewed


def diff_files_viewed(*, session: Session, user) -> list[str]:
    """The keys of the diff files `user` has marked viewed in `session`."""
    if not user.is_authenticated:
        return []
    return list(ViewedFile.objects.filter(session=session, user=user).values_list("key", flat=True))


# -- the whole file -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WholeFile:
    path: str
    commit: str
    patch: str
    content: str
    source: str  # "mirror", "sandbox" or "snapshot": where it was read


def whole_file(session: Session, path: str, commit: str = "", *, actor=None) -> WholeFile:
    """The file `path` of `session`'s diff as its turn left it (the `commit` of that diff, or
    the newest), for `actor` (who is audited if a sandbox is restored to read it).
    DiffReviewError, with a message for the reviewer, when the path is outside the repository
    or not in the diff, the file is binary, deleted or too large, or no copy of the session's
    commits can be reached."""
    path = repository_path(path)
    if commit and not _COMMIT.match(commit):
        raise DiffReviewError("commit must be a commit id (hexadecimal).")
    event = diff_event(session, path, commit)
    payload = event.payload
    if payload.get("binary"):
        raise DiffReviewError(f"{path} is a binary file: there is no text to show.", 422)
    patch = payload.get("patch", "")
    if diff_render.parse_patch(patch).status == "deleted":
        raise DiffReviewError(
            f"{path} was deleted by this change: the diff already shows all of it.", 422
        )
    at = _turn_commit(session, payload)
    for source, read in (
        ("mirror", _from_mirror),
        ("sandbox", _from_live_sandbox),
        ("snapshot", partial(_from_session_snapshot, actor=actor)),
    ):
        data = read(session, at, path)
        if data is not None:
            return WholeFile(path, at, patch, _as_text(path, data), source)
    raise DiffReviewError(
        f"The whole of {path} cannot be read now: the session's commits are not published and "
        "its sandbox and snapshot are gone. The diff above is all that was kept.",
        status=409,
    )


def _turn_commit(session: Session, payload: dict) -> str:
    """The commit the diff was taken at: its own, or (a turn that committed nothing) the
    newest commit of the turns up to it."""
    commit = payload.get("commit") or ""
    if not commit:
        commit = (
            Prompt.objects.filter(session=session, order__lte=payload.get("turn") or 0)
            .exclude(commit="")
            .order_by("-order")
            .values_list("commit", flat=True)
            .first()
        ) or ""
    if not _COMMIT.match(commit):
        raise DiffReviewError(
            "This change has no commit to read the whole file from (the turn committed nothing).",
            status=409,
        )
    return commit


def _too_large(path: str, size: int) -> DiffReviewError:
    return DiffReviewError(
        f"{path} is {_bytes(size)}, more than the {_bytes(diff_render.WHOLE_FILE_MAX_BYTES)} "
        "shown whole: the diff shows its changes.",
        status=413,
    )


def _bytes(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    return f"{round(n / 1000)} KB" if n >= 1000 else f"{n} bytes"


def _as_text(path: str, data: bytes) -> str:
    if b"\0" in data[:8192]:
        raise DiffReviewError(f"{path} is a binary file: there is no text to show.", 422)
    text = data.decode("utf-8", "replace")
    lines = text.count("\n")
    if lines > diff_render.WHOLE_FILE_MAX_LINES:
        raise DiffReviewError(
            f"{path} has {lines:,} lines, more than the {diff_render.WHOLE_FILE_MAX_LINES:,} "
            "shown whole: the diff shows its changes.",
            status=413,
        )
    return text


def _from_mirror(session: Session, commit: str, path: str) -> bytes | None:
    """The blob from the repository's mirror on the worker; None when the mirror lacks it."""
    where = mirror.mirror_path(session.repository.name)
    if not where.is_dir():
        return None
    try:
        return mirror.read_blob(where, commit, path, max_bytes=diff_render.WHOLE_FILE_MAX_BYTES)
    except mirror.BlobTooLarge as exc:
        raise _too_large(path, exc.size) from None


def _read_in(sandbox: Sandbox, commit: str, path: str) -> bytes | None:
    spec = shlex.quote(f"{commit}:{path}")
    sized = sandbox.run(f"{GIT} cat-file -s {spec}", cwd="/workspace", timeout=READ_SECONDS)
    if not sized.ok:
        return None
    try:
        size = int(sized.stdout.strip())
    except ValueError:
        return None
    if size > diff_render.WHOLE_FILE_MAX_BYTES:
        raise _too_large(path, size)
    blob = sandbox.run(f"{GIT} cat-file blob {spec}", cwd="/workspace", timeout=READ_SECONDS)
    return blob.stdout.encode() if blob.ok else None


def _from_live_sandbox(session: Session, commit: str, path: str) -> bytes | None:
    if not session.sandbox_id:
        return None
    try:
        sandbox = sandbox_backend(session.sandbox_backend or None).attach(session.sandbox_id)
        return _read_in(sandbox, commit, path)
    except (SandboxGone, SandboxError):
        return None


def _from_session_snapshot(session: Session, commit: str, path: str, *, actor) -> bytes | None:
    """Read inside a sandbox restored from the session's own snapshot, with no network, ended
    right after (the session's state is untouched: nothing is written back)."""
    if not session.session_snapshot_ref:
        return None
    try:
        ref = SnapshotRef.parse(session.session_snapshot_ref)
        sandbox = sandbox_backend().create(
            snapshot=ref,
            network=NetworkPolicy("none"),
            limits=Limits(wall_seconds=READ_SECONDS, lifetime_seconds=READ_SECONDS * 2),
            labels={"repository": session.repository.name, "purpose": "diff-context"},
        )
    except (ValueError, SandboxError) as exc:
        log.warning("restoring session %s to read %s failed: %s", session.pk, path, exc)
        return None
    try:
        record(
            "sandbox.restore",
            actor=actor,
            session=session,
            object_type="session",
            object_id=session.pk,
            data={"sandbox": sandbox.id, "for": "diff context", "path": path, "commit": commit},
        )
        return _read_in(sandbox, commit, path)
    except (SandboxGone, SandboxError):
        return None
    finally:
        with contextlib.suppress(Exception):
            sandbox.terminate()
