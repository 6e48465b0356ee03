"""What a turn changed, recorded: its commit (authored by the prompt's author), the diff against
the session's base as `diff` events with who wrote each file, and the sandbox's egress refusals.

Called by the turn runner (sessions/runner.py) after the agent, whether the turn verifies or
fails keeping its work; the terminal commits its typists' edits with the same authorship rule.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from accounts.identity import verified_email
from sessions.agents.base import Author
from sessions.events import append_events, diff_attribution
from sessions.models import Event, Prompt, Session
from sessions.workspace_git import FileDiff, commit_turn, diff_against, paths_changed_by
from snapshots.sandbox import Sandbox


def commit_author(user) -> Author:
    """The git author for `user`'s work."""
    name = user.get_full_name() or user.get_username()
    # An address the user only typed in could be anyone's: unverified, it authors nothing.
    email = verified_email(user) or f"{user.get_username()}@users.inspect-web.invalid"
    return Author(username=user.get_username(), name=name, email=email)


def diff_events(
    files: list[FileDiff], turn: int, commit: str | None, authorship: Callable[[str], dict]
) -> list[tuple[str, dict]]:
    """One `diff` event per changed file; `authorship(path)` gives who wrote it
    ({"author"[, "by_hand"]})."""
    return [
        (
            "diff",
            {
                "path": f.path,
                "added": f.added,
                "removed": f.removed,
                "binary": f.binary,
                "patch": f.patch,
                "turn": turn,
                "commit": commit,
                **authorship(f.path),
            },
        )
        for f in files
    ]


def diff_stats(files: list[FileDiff]) -> dict:
    """The session's `diff_stats`: how many files, lines added and removed, which paths."""
    return {
        "files": len(files),
        "added": sum(f.added for f in files),
        "removed": sum(f.removed for f in files),
        "paths": [f.path for f in files],
    }


def record_turn_diff(
    session: Session, prompt: Prompt, sandbox: Sandbox, save: Callable[..., None]
) -> tuple[str, dict]:
    """Commit the turn's work and append its diff; returns (the commit or "", the diff stats).
    `save` is the runner's fenced save (it refuses once the turn lost its lease), so the stats
    and the events land together or not at all."""
    commit = commit_turn(
        sandbox, author=commit_author(prompt.author), message=prompt.text.splitlines()[0][:72]
    )
    if commit:
        Prompt.objects.filter(pk=prompt.pk).update(commit=commit)
    files = diff_against(sandbox, session.base_commit)
    # A file this turn did not touch keeps its author (e.g. an earlier hand edit's typist).
    touched = paths_changed_by(sandbox, commit) if commit else set()
    earlier = diff_attribution(session.pk)
    mine = {"author": prompt.author.get_username()}
    with transaction.atomic():
        events = diff_events(
            files, prompt.order, commit,
            lambda path: earlier.get(path, mine) if path not in touched else mine,
        )  # fmt: skip
        append_events(session.pk, events)
        stats = diff_stats(files)
        save(diff_stats=stats)
    return commit, stats


def report_egress_refusals(session: Session, sandbox: Sandbox, turn: int) -> None:
    """One ``egress_refused`` event per refusal of the sandbox's egress since the last."""
    reported = Event.objects.filter(
        session=session, kind="egress_refused", payload__sandbox=sandbox.id
    ).count()
    refusals = sandbox.egress_refusals(after=reported)
    if refusals:
        append_events(
            session.pk,
            [("egress_refused", {**r, "sandbox": sandbox.id, "turn": turn}) for r in refusals],
        )
