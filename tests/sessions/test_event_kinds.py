"""Every event kind has a typed payload, its own template, and `status` rows of old are split
into them by a migration that can be undone."""

import importlib
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings

from sessions.event_kinds import EVENT_KINDS, KINDS, check_payload
from sessions.events import append_event
from sessions.models import Event, Session

pytestmark = pytest.mark.django_db
migration = importlib.import_module("sessions.migrations.0011_split_status_events")

# Each shape a `status` event had, and the kind and payload it is now.
OLD_AND_NEW = [
    ({"from": "queued", "to": "provisioning"}, "state", {"from": "queued", "to": "provisioning"}),
    ({"from": "running", "to": "idle", "reason": "stopped by ada"}, "state",
     {"from": "running", "to": "idle", "reason": "stopped by ada"}),
    ({"turn": 1, "timings": {"turn_ms": 3.5}}, "turn_finished",
     {"turn": 1, "timings": {"turn_ms": 3.5}}),
    ({"synced": True, "sync_ms": 2.0, "drift": {"commits": 1, "files": 2, "stale": False},
      "turn": 1}, "workspace_synced",
     {"sync_ms": 2.0, "drift": {"commits": 1, "files": 2, "stale": False}, "turn": 1}),
    ({"stop_requested_by": "ada"}, "stop_requested", {"by": "ada"}),
    ({"phase": "publish", "message": "pushing to b-2 instead"}, "publish_note",
     {"message": "pushing to b-2 instead"}),
    ({"pull_request": 1, "pr_url": "/sessions/1/#pull-request", "branch": "b", "head": "h",
      "opened": True, "host": "local", "opened_as_app": False}, "pull_request_published",
     {"pull_request": 1, "pr_url": "/sessions/1/#pull-request", "branch": "b", "head": "h",
      "opened": True, "host": "local", "opened_as_app": False}),
    ({"pull_request": 1, "review": "approved", "reviewer": "bo", "commit": "c",
      "message": "bo reviewed: approved"}, "review",
     {"pull_request": 1, "review": "approved", "reviewer": "bo", "commit": "c",
      "message": "bo reviewed: approved"}),
    ({"pull_request": 1, "reverted": True, "revert_sha": "r", "message": "b was reverted"},
     "pull_request_reverted", {"pull_request": 1, "revert_sha": "r", "message": "b was reverted"}),
    ({"pull_request": 1, "phase": "github", "head": "h", "message": "b was updated on GitHub"},
     "pull_request_pushed_outside",
     {"pull_request": 1, "head": "h", "message": "b was updated on GitHub"}),
    ({"pull_request": 1, "merged": True, "sha": "m"}, "pull_request_merged",
     {"pull_request": 1, "sha": "m"}),
    ({"pull_request": 1, "closed": True}, "pull_request_closed", {"pull_request": 1}),
]  # fmt: skip


def test_every_kind_has_its_template_and_the_migrated_payloads_fit_their_kinds():
    templates = Path(settings.BASE_DIR) / "templates" / "sessions" / "events"
    assert {p.stem for p in templates.glob("*.html")} == KINDS | {"_unknown"}
    assert len(EVENT_KINDS) == len(KINDS)
    for _, kind, payload in OLD_AND_NEW:
        check_payload(kind, payload)


def test_a_payload_that_does_not_fit_its_kind_is_refused(team):
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    with pytest.raises(ValueError, match="unknown event kind 'status'"):
        append_event(session.pk, "status", {"from": "queued", "to": "provisioning"})
    with pytest.raises(ValueError, match=r"lacks \['to'\]"):
        append_event(session.pk, "state", {"from": "queued"})
    with pytest.raises(ValueError, match=r"undeclared keys \['merged'\]"):
        append_event(session.pk, "pull_request_merged", {"pull_request": 1, "sha": "", "merged": 1})
    # An agent's kinds are open: a runtime may add keys of its own.
    append_event(session.pk, "tool_result", {"name": "x", "ok": True, "waited_for_sync_ms": 1})
    assert list(Event.objects.filter(session=session).values_list("kind", flat=True)) == [
        "tool_result"
    ]


def test_the_migration_splits_status_rows_in_batches_and_undoes_it(team, monkeypatch):
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    odd = {"heartbeat": 1}  # fits no shape: stays `status`, shown by the fallback template
    old = [old for old, _, _ in OLD_AND_NEW] + [odd]
    Event.objects.bulk_create(
        [Event(session=session, seq=seq, kind="status", payload=p) for seq, p in enumerate(old, 1)]
        + [Event(session=session, seq=len(old) + 1, kind="output", payload={"text": "x"})]
    )
    monkeypatch.setattr(migration, "BATCH", 5)  # several batches

    migration.forwards(apps, None)
    rows = list(Event.objects.filter(session=session).order_by("seq"))
    assert [(r.kind, r.payload) for r in rows] == [
        *[(kind, new) for _, kind, new in OLD_AND_NEW],
        ("status", odd),
        ("output", {"text": "x"}),
    ]
    migration.forwards(apps, None)  # run again (an interrupted run): nothing changes
    assert [(r.kind, r.payload) for r in Event.objects.order_by("seq")] == [
        (r.kind, r.payload) for r in rows
    ]

    migration.backwards(apps, None)
    rows = list(Event.objects.filter(session=session).order_by("seq"))
    assert [(r.kind, r.payload) for r in rows] == [
        *[("status", p) for p in old],
        ("output", {"text": "x"}),
    ]
