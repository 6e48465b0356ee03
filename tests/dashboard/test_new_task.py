import pytest
from django.urls import reverse

from sessions.models import Session

pytestmark = pytest.mark.django_db


def test_the_picker_offers_only_repositories_the_user_may_start_sessions_on(client, team):
    client.force_login(team.engineer)
    page = client.get(reverse("sessions:new")).content.decode()
    assert ">widgets</option>" in page
    assert "gadgets" not in page
    assert 'for="id_prompt"' in page  # labelled controls


def test_a_role_without_start_permission_is_told_so(client, team):
    client.force_login(team.manager)
    page = client.get(reverse("sessions:new")).content.decode()
    assert "ask a repository admin for the engineer role" in page


def test_an_empty_prompt_is_refused_by_the_form(client, team):
    client.force_login(team.engineer)
    response = client.post(
        reverse("sessions:new"),
        {
            "repository": team.repository.pk,
            "agent": "command",
            "agent_command": "true",
            "prompt": " ",
        },
    )
    assert response.status_code == 200
    assert "The prompt is empty" in response.content.decode()
    assert not Session.objects.exists()


def test_a_valid_task_starts_a_session_and_opens_its_page(
    client, team, django_capture_on_commit_callbacks
):
    client.force_login(team.engineer)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(
            reverse("sessions:new"),
            {"repository": team.repository.pk, "agent": "command", "agent_command": "true",
             "prompt": "add a README"},
        )  # fmt: skip
    session = Session.objects.get()
    assert response.status_code == 302 and response.url == session.get_absolute_url()
    assert session.prompts.get().author == team.engineer
    # Viewers are notified, the turn is queued for a worker, the metrics rollup is refreshed.
    assert len(callbacks) == 3


def test_a_foreign_repository_cannot_be_chosen(client, team):
    client.force_login(team.engineer)
    response = client.post(
        reverse("sessions:new"),
        {"repository": team.other_repository.pk, "agent": "command", "agent_command": "true",
         "prompt": "x"},
    )  # fmt: skip
    assert "Select a valid choice" in response.content.decode()
    assert not Session.objects.exists()


def test_the_list_filters_and_searches(client, team):
    Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix login", branch="main"
    )
    Session.objects.create(
        repository=team.repository,
        creator=team.admin,
        title="Bump deps",
        branch="main",
        state="idle",
    )
    client.force_login(team.engineer)
    page = client.get(reverse("sessions:list") + "?q=login").content.decode()
    assert "Fix login" in page and "Bump deps" not in page
    page = client.get(reverse("sessions:list") + "?state=idle").content.decode()
    assert "Bump deps" in page and "Fix login" not in page
    page = client.get(reverse("sessions:list") + "?mine=1").content.decode()
    assert "Fix login" in page and "Bump deps" not in page


def test_the_default_agent_is_the_repositorys_then_the_sites(client, team, settings):
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # a local endpoint: builtin needs no key
    settings.LLM_API_KEY = ""
    client.force_login(team.engineer)
    page = client.get(reverse("sessions:new")).content.decode()
    assert '<option value="" selected>default</option>' in page
    team.repository.default_agent = "builtin"
    team.repository.save()
    response = client.post(
        reverse("sessions:new"),
        {"repository": team.repository.pk, "agent": "", "model": "qwen2.5-coder",
         "prompt": "add a README"},
    )  # fmt: skip
    session = Session.objects.get()
    assert response.status_code == 302, response.content.decode()
    assert (session.agent, session.model) == ("builtin", "qwen2.5-coder")


def test_a_missing_model_key_for_the_default_agent_is_explained(client, team, settings):
    settings.DEFAULT_AGENT = "claude-code"
    settings.ANTHROPIC_API_KEY = ""
    client.force_login(team.engineer)
    response = client.post(
        reverse("sessions:new"), {"repository": team.repository.pk, "prompt": "add a README"}
    )
    assert response.status_code == 200
    assert "ANTHROPIC_API_KEY" in response.content.decode()
    assert not Session.objects.exists()


PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
)


def test_an_attached_image_is_linked_from_the_prompt_and_shown_to_members_only(client, team):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(team.engineer)
    client.post(
        reverse("sessions:new"),
        {"repository": team.repository.pk, "agent": "command", "agent_command": "true",
         "prompt": "make it look like this",
         "images": SimpleUploadedFile("mock up.png", PNG, content_type="image/png")},
    )  # fmt: skip
    text = Session.objects.get().prompts.get().text
    assert text.startswith("make it look like this\n\nAttached images:\n/sessions/attachments/")
    link = text.splitlines()[-1]
    assert link.endswith("/mock%20up.png")

    client.force_login(team.reviewer)
    image = client.get(link)
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert b"".join(image.streaming_content) == PNG
    client.force_login(team.outsider)
    assert client.get(link).status_code == 404
    assert client.get(link.replace("mock%20up", "other")).status_code == 404


def test_a_file_that_is_not_named_as_an_image_is_refused(client, team):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(team.engineer)
    page = client.post(
        reverse("sessions:new"),
        {"repository": team.repository.pk, "agent": "command", "agent_command": "true",
         "prompt": "look", "images": SimpleUploadedFile(
             "page.html", b"<script>alert(1)</script>", content_type="image/png")},
    ).content.decode()  # fmt: skip
    assert "page.html is not a PNG, JPEG, GIF or WebP image." in page
    assert not Session.objects.exists()


def test_typing_a_prompt_prewarms_a_sandbox_for_that_repository_only(
    client, team, django_capture_on_commit_callbacks
):
    client.force_login(team.engineer)
    form = client.get(reverse("sessions:new")).content.decode()
    assert f'hx-post="{reverse("sessions:prewarm")}" hx-trigger="keyup changed' in form
    with django_capture_on_commit_callbacks() as callbacks:
        answer = client.post(reverse("sessions:prewarm"), {"repository": team.repository.pk})
    assert answer.json() == {"prewarming": True} and len(callbacks) == 1

    foreign = client.post(reverse("sessions:prewarm"), {"repository": team.other_repository.pk})
    assert foreign.status_code == 404
    client.force_login(team.reviewer)  # may watch, may not start sessions
    assert (
        client.post(reverse("sessions:prewarm"), {"repository": team.repository.pk}).status_code
        == 404
    )
