import time

import pytest
from django.test import override_settings

from sessions.models import Session
from snapshots.backends import sandbox_backend
from snapshots.garbage import collect_snapshot_garbage
from snapshots.models import Snapshot
from snapshots.prewarm import claim_prewarmed, prewarm_sandbox, reap_prewarmed_sandboxes
from snapshots.sandbox import SandboxGone

pytestmark = pytest.mark.django_db


def build(inspect_cli) -> Snapshot:
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--full")
    assert code == 0, err
    return Snapshot.objects.filter(state__in=["ready"]).first()


def test_gc_keeps_the_newest_and_those_live_sessions_use(inspect_cli, widgets, team):
    first = build(inspect_cli)
    Session.objects.create(
        repository=widgets, creator=team.engineer, title="t", branch="main", state="idle",
        snapshot=first,
    )  # fmt: skip
    second = build(inspect_cli)
    third = build(inspect_cli)
    fourth = build(inspect_cli)
    deleted = collect_snapshot_garbage(keep=1)
    states = {s.pk: s.state for s in Snapshot.objects.all()}
    assert states[fourth.pk] == "ready"
    assert states[first.pk] == "superseded"  # a live session still restores from it
    assert states[second.pk] == states[third.pk] == "deleted"
    assert sorted(deleted) == sorted([second.pk, third.pk])


def test_a_prewarmed_sandbox_is_claimed_by_its_user_only_once(inspect_cli, widgets, team):
    build(inspect_cli)
    sandbox_id = prewarm_sandbox(team.engineer.pk, widgets)
    assert prewarm_sandbox(team.engineer.pk, widgets) == sandbox_id  # idempotent while waiting
    assert claim_prewarmed(team.reviewer.pk, widgets) is None
    claimed = claim_prewarmed(team.engineer.pk, widgets)
    assert claimed is not None and claimed.id == sandbox_id
    assert claimed.run("cat README.md").stdout == "# widgets\n"
    assert claim_prewarmed(team.engineer.pk, widgets) is None
    claimed.terminate()


@override_settings(PREWARM_SECONDS=1)
def test_an_unclaimed_prewarmed_sandbox_expires(inspect_cli, widgets, team):
    build(inspect_cli)
    sandbox_id = prewarm_sandbox(team.engineer.pk, widgets)
    time.sleep(1.2)
    assert reap_prewarmed_sandboxes() >= 1
    with pytest.raises(SandboxGone):
        sandbox_backend().attach(sandbox_id).run("true")
