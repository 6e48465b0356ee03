"""A changed file read whole before the session's commits reach the mirror: from the session's
live sandbox, else from a sandbox restored from its own snapshot for that one read (and ended
at once). Real sandboxes of the configured backend."""

from __future__ import annotations

import shutil

import pytest

from approvals.models import AuditEntry
from sessions.diff_review import whole_file
from snapshots import mirror
from snapshots.backends import sandbox_backend
from snapshots.sandbox import NetworkPolicy, SnapshotRef
from tests.sessions.review_fixtures import APP_AFTER

pytestmark = pytest.mark.django_db


@pytest.fixture
def unpublished(team, reviewed_change):
    """The change with no mirror to read it from, and a session snapshot of its workspace."""
    shutil.rmtree(mirror.mirror_path(team.repository.name))
    backend = sandbox_backend()
    ref = backend.snapshot_from_directory(str(reviewed_change.upstream.path))
    reviewed_change.session.session_snapshot_ref = str(ref)
    reviewed_change.session.save()
    yield reviewed_change
    backend.delete_snapshot(ref)


def test_it_is_read_in_the_live_sandbox(unpublished):
    session = unpublished.session
    backend = sandbox_backend()
    ref = SnapshotRef.parse(session.session_snapshot_ref)
    sandbox = backend.create(snapshot=ref, network=NetworkPolicy("none"))
    try:
        # Only the live sandbox has the commits: no mirror, no snapshot to restore.
        session.sandbox_id, session.sandbox_backend = sandbox.id, backend.name
        session.session_snapshot_ref = ""
        session.save()
        found = whole_file(session, "src/app.py")
        assert found.source == "sandbox" and found.content == APP_AFTER
    finally:
        sandbox.terminate()


def test_it_is_read_in_a_sandbox_restored_from_the_sessions_snapshot(unpublished, team):
    backend = sandbox_backend()
    before = set(backend.list_sandboxes())
    found = whole_file(unpublished.session, "src/app.py", actor=team.reviewer)
    assert found.source == "snapshot" and found.content == APP_AFTER
    assert set(backend.list_sandboxes()) <= before  # the one it restored is gone again
    entry = AuditEntry.objects.get(action="sandbox.restore")
    assert entry.actor_id == team.reviewer.pk and entry.data["for"] == "diff context"
