"""Event artifacts: the whole payload of an event too large for the event log (sessions.events
keeps its head and tail), stored in Django storage. Served to members of the session's
repository only by sessions.sandbox_views.event_artifact."""

from __future__ import annotations

import re
import uuid

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.urls import reverse

# What `save` names an artifact: the event's kind and a random hex.
NAME = re.compile(r"^[a-z_]+-[0-9a-f]{32}\.json$")


def path_of(session_id: int, name: str) -> str:
    return f"artifacts/session-{int(session_id)}/{name}"


def save(session_id: int, kind: str, raw: bytes) -> str:
    """Store `raw` (an event's whole payload as JSON) and return the link that serves it."""
    stored = default_storage.save(
        path_of(session_id, f"{kind}-{uuid.uuid4().hex}.json"), ContentFile(raw)
    )
    return reverse("sandbox:artifact", args=[session_id, stored.rsplit("/", 1)[-1]])
