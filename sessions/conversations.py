"""A session's conversation with its agent, kept between turns, and the images a prompt carries.

The runner loads the conversation before a turn and stores it after, however the turn ended
(a failed or stopped turn was still said); only the session's current driver may store it.
"""

from __future__ import annotations

import logging

from django.core.files.storage import default_storage
from django.db import transaction

from sessions.agents.base import Conversation, Image
from sessions.forms import ATTACHMENTS, IMAGE_SUFFIXES
from sessions.models import AgentConversation, Prompt, Session

log = logging.getLogger(__name__)

MAX_IMAGES = 8
MAX_IMAGE_BYTES = 5 * 1024 * 1024


def load(session: Session) -> Conversation:
    """The session's conversation so far; empty for a first turn or after the agent changed."""
    row = AgentConversation.objects.filter(session=session).first()
    if row is None or row.runtime != session.agent:
        return Conversation()
    return Conversation(
        resume_id=row.resume_id, messages=list(row.messages or []), summary=row.summary
    )


def store(session: Session, conversation: Conversation, *, fence: int) -> bool:
    """Keep `conversation` as the session's; False (nothing written) if `fence` is no longer
    the session's driver's (a newer driver owns the conversation now)."""
    with transaction.atomic():
        owned = (
            Session.objects.select_for_update().filter(pk=session.pk, driver_fence=fence).exists()
        )
        if not owned:
            return False
        AgentConversation.objects.update_or_create(
            session=session,
            defaults={
                "runtime": session.agent,
                "resume_id": conversation.resume_id,
                "messages": conversation.messages,
                "summary": conversation.summary,
            },
        )
    return True


def prompt_images(prompt: Prompt) -> tuple[Image, ...]:
    """The images attached to `prompt` (uploaded with a session's first prompt), as bytes for
    runtimes that send images to the model. A file gone from storage is skipped (its link is
    still in the prompt's text)."""
    if prompt.order != 1:
        return ()
    images = []
    for attachment in prompt.session.attachments.order_by("pk")[:MAX_IMAGES]:
        media_type = IMAGE_SUFFIXES.get(attachment.name.rsplit(".", 1)[-1].lower())
        path = f"{ATTACHMENTS}/{attachment.folder}/{attachment.name}"
        if media_type is None:
            continue
        try:
            if default_storage.size(path) > MAX_IMAGE_BYTES:
                continue
            with default_storage.open(path) as handle:
                data = handle.read()
        except OSError as exc:
            log.warning("attachment %s of session %s unreadable: %s", path, prompt.session_id, exc)
            continue
        images.append(Image(name=attachment.name, media_type=media_type, data=data))
    return tuple(images)
