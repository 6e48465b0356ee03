"""Attachments belong to the session they were uploaded for: quoting an attachment's link in a
prompt of another repository grants nothing, whatever the link's secrecy."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from tests.dashboard.test_new_task import PNG

pytestmark = pytest.mark.django_db


def new_task(user, repository, prompt: str, **files) -> str:
    """Start a session on the New task page as `user`; the text of its first prompt."""
    from sessions.models import Session

    client = Client()
    client.force_login(user)
    answer = client.post(
        reverse("sessions:new"),
        {"repository": repository.pk, "agent": "command", "agent_command": "true",
         "prompt": prompt, **files},
    )  # fmt: skip
    assert answer.status_code == 302, answer.content.decode()
    return Session.objects.filter(repository=repository).latest("pk").prompts.get().text


def fetch(user, link: str) -> int:
    client = Client()
    client.force_login(user)
    return client.get(link).status_code


def test_quoting_another_repositorys_attachment_link_grants_nothing(team):
    image = SimpleUploadedFile("secret.png", PNG, content_type="image/png")
    text = new_task(team.engineer, team.repository, "like this", images=image)
    link = text.splitlines()[-1]
    assert link.startswith("/sessions/attachments/")
    assert fetch(team.reviewer, link) == 200
    assert fetch(team.outsider, link) == 404

    # The outsider (admin of `gadgets` only) quotes the link in a session of their own.
    new_task(team.outsider, team.other_repository, f"what is this? {link}")
    assert fetch(team.outsider, link) == 404
    # ... and in a follow-up prompt too.
    from sessions import services
    from sessions.models import Session

    theirs = Session.objects.filter(repository=team.other_repository).get()
    services.prompt_queue(session=theirs, author=team.outsider, text=f"and {link}")
    assert fetch(team.outsider, link) == 404
    assert fetch(team.engineer, link) == 200


def test_an_attachment_linked_by_no_session_is_for_site_admins_only(team):
    """Files stored before attachments had an owner, never linked from a prompt."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from sessions.forms import ATTACHMENTS

    folder = "0" * 32
    default_storage.save(f"{ATTACHMENTS}/{folder}/orphan.png", ContentFile(PNG))
    link = f"/sessions/attachments/{folder}/orphan.png"
    new_task(team.outsider, team.other_repository, f"look {link}")
    assert fetch(team.outsider, link) == 404
    assert fetch(team.engineer, link) == 404
    assert fetch(team.admin, link) == 200  # the site's superuser


def test_existing_images_go_to_the_session_whose_prompt_linked_them_first(team):
    """The migration that gave attachments an owner: the first linking prompt, not a quote."""
    import importlib

    from django.apps import apps

    from sessions.models import Attachment, Session

    image = SimpleUploadedFile("plan.png", PNG, content_type="image/png")
    link = new_task(team.engineer, team.repository, "build this", images=image).splitlines()[-1]
    new_task(team.outsider, team.other_repository, f"and this {link}")
    Attachment.objects.all().delete()  # as before the migration

    migration = importlib.import_module("sessions.migrations.0008_attachment")
    migration.owners_from_prompts(apps, None)
    [attachment] = Attachment.objects.all()
    assert attachment.session == Session.objects.get(repository=team.repository)
    assert attachment.uploaded_by == team.engineer
    assert fetch(team.reviewer, link) == 200
    assert fetch(team.outsider, link) == 404
