"""`status` events become kinds named by what happened (sessions.event_kinds).

A `status` row's payload said what it was by which keys it held; the page told them apart in
this order, and so does the split. A row that fits none of the shapes stays `status` (the page
shows it with the fallback template). Backwards restores the old shapes.

Not atomic: each batch of rows commits on its own, so a large table is not rewritten in one
transaction. Either direction only touches rows it has not converted yet, so an interrupted
run can simply be run again.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, transaction

BATCH = 2000

# The flags that told the shapes apart and that the new kinds make redundant.
FLAGS = {
    "workspace_synced": {"synced": True},
    "pull_request_reverted": {"reverted": True},
    "pull_request_pushed_outside": {"phase": "github"},
    "publish_note": {"phase": "publish"},
    "pull_request_merged": {"merged": True},
    "pull_request_closed": {"closed": True},
}
NEW_KINDS = (
    "state", "turn_finished", "workspace_synced", "stop_requested", "review",
    "pull_request_reverted", "pull_request_pushed_outside", "publish_note",
    "pull_request_merged", "pull_request_closed", "pull_request_published",
)  # fmt: skip


def split(payload: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The new (kind, payload) of a `status` payload, or None if it fits no known shape."""
    p = payload if isinstance(payload, dict) else {}
    if "to" in p:
        kind = "state"
    elif "timings" in p:
        kind = "turn_finished"
    elif "synced" in p:
        kind = "workspace_synced"
    elif "stop_requested_by" in p:
        return "stop_requested", {"by": p["stop_requested_by"]}
    elif "message" in p and "review" in p:
        kind = "review"
    elif "message" in p and "reverted" in p:
        kind = "pull_request_reverted"
    elif "message" in p and p.get("phase") == "github":
        kind = "pull_request_pushed_outside"
    elif "message" in p and p.get("phase") == "publish":
        kind = "publish_note"
    elif "message" in p:
        return None
    elif "pull_request" in p and "merged" in p:
        kind = "pull_request_merged"
    elif "pull_request" in p and "closed" in p:
        kind = "pull_request_closed"
    elif "pull_request" in p:
        kind = "pull_request_published"
    else:
        return None
    flags = FLAGS.get(kind, {})
    return kind, {k: v for k, v in p.items() if k not in flags}


def join(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The `status` payload a new kind's payload was made from."""
    if kind == "stop_requested":
        return {"stop_requested_by": payload.get("by", "")}
    return {**payload, **FLAGS.get(kind, {})}


def _rewrite(apps, kinds: tuple[str, ...], convert) -> None:
    Event = apps.get_model("agent_sessions", "Event")
    last = 0
    while True:
        rows = list(Event.objects.filter(kind__in=kinds, pk__gt=last).order_by("pk")[:BATCH])
        if not rows:
            return
        last = rows[-1].pk
        changed = [row for row in rows if convert(row)]
        if changed:
            with transaction.atomic():
                Event.objects.bulk_update(changed, ["kind", "payload"])


def forwards(apps, schema_editor) -> None:
    def convert(row) -> bool:
        new = split(row.payload)
        if new is None:
            return False
        row.kind, row.payload = new
        return True

    _rewrite(apps, ("status",), convert)


def backwards(apps, schema_editor) -> None:
    def convert(row) -> bool:
        row.kind, row.payload = "status", join(row.kind, row.payload or {})
        return True

    _rewrite(apps, NEW_KINDS, convert)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("agent_sessions", "0010_github_models_to_integrations")]
    operations = [migrations.RunPython(forwards, backwards)]
