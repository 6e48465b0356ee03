"""A session with a real change to review: an upstream repository with a base commit and a
turn's commit, the repository's mirror holding both (as after the session's commits were
published), and the turn's `diff` events as the runner records them."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest

from inspect_web.text import cut
from sessions.events import append_events
from sessions.models import Event, Session
from sessions.turn_changes import diff_events
from sessions.workspace_git import MAX_PATCH, FileDiff
from snapshots import mirror

APP_BEFORE = "".join(f"def step_{i}():\n    return {i}\n\n\n" for i in range(40))
APP_AFTER = APP_BEFORE.replace("    return 20\n", '    return "twenty <b>"  # changed\n')
APP_AFTER += 'def added():\n    """New at the end."""\n    return None\n'


@dataclass
class ReviewedChange:
    session: Session
    base: str
    head: str
    upstream: object

    def diff(self, path: str) -> dict:
        return (
            Event.objects.filter(session=self.session, kind="diff", payload__path=path)
            .latest("seq")
            .payload
        )


def turn_diff(upstream, base: str, head: str) -> list[FileDiff]:
    """What sessions.workspace_git.diff_against records, from the upstream's own git."""
    numstat = upstream.git("diff", "--numstat", base, head)
    patches: dict[str, str] = {}
    for chunk in upstream.git("diff", base, head).split("diff --git ")[1:]:
        path = chunk.split("\n", 1)[0].split(" b/", 1)[-1]
        patch = "diff --git " + chunk
        patches[path] = cut(patch, MAX_PATCH, 0).joined("\n… (truncated)\n")
    files = []
    for line in numstat.splitlines():
        added, removed, path = line.split("\t", 2)
        binary = added == "-"
        files.append(
            FileDiff(path, 0 if binary else int(added), 0 if binary else int(removed), binary,
                     patches.get(path, ""))
        )  # fmt: skip
    return files


@pytest.fixture
def reviewed_change(team, make_git_repo) -> ReviewedChange:
    upstream = make_git_repo(files={"README.md": "# widgets\n", "src/app.py": APP_BEFORE})
    base = upstream.git("rev-parse", "HEAD").strip()
    (upstream.path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0" + bytes(range(256)))
    head = upstream.commit(
        {
            "src/app.py": APP_AFTER,
            "notes.zzq": "a file of no known language <i>\nsecond line\n",
            "src/huge.py": "x = 1\n" * 30_000,
        },
        "a turn's change",
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    subprocess.run(
        ["git", "clone", "--quiet", "--mirror", str(upstream.path),
         str(mirror.mirror_path(team.repository.name))],
        check=True, capture_output=True,
    )  # fmt: skip
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Review me", branch="main",
        base_commit=base,
    )  # fmt: skip
    files = turn_diff(upstream, base, head)
    append_events(session.pk, diff_events(files, 1, head, lambda path: {"author": "engineer"}))
    return ReviewedChange(session=session, base=base, head=head, upstream=upstream)
