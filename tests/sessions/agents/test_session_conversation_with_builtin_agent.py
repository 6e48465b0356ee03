"""A three-turn session with the built-in agent, through the real runner, a real sandbox and the
stand-in model over HTTP behind the model gateway (the agent calls it from the worker with each
turn's token): Grace asks for a file, Alan follows up twice referring only to the
earlier turns ("the file you created", "what you just did"). The conversation the runner keeps
between turns is what makes the follow-ups work."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Membership, Role
from sessions.models import AgentConversation, Event
from tests.gateway.conftest import UPSTREAM_KEY

# Tokens are committed: the gateway process checks them through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def standin(fresh_upstream, gateway, platform_gateway):
    """The provider, behind this run's gateway, which the platform uses."""
    platform_gateway(gateway)
    return fresh_upstream


@pytest.fixture(params=["openai", "anthropic"])
def provider(request, settings, standin):
    settings.LLM_PROVIDER = request.param
    settings.LLM_RETRIES = 0
    # The platform's key (held by the gateway) for the provider under test only.
    settings.LLM_API_KEY = settings.ANTHROPIC_API_KEY = ""
    if request.param == "openai":
        settings.LLM_API_KEY = UPSTREAM_KEY
        settings.LLM_MODEL = "gpt-4.1"
    else:
        settings.ANTHROPIC_API_KEY = UPSTREAM_KEY
        settings.LLM_MODEL = "claude-sonnet-4-5"
    return request.param


def engineer(team, username: str, first: str, last: str):
    user = get_user_model().objects.create_user(
        username, password="correct horse battery staple", first_name=first, last_name=last
    )
    Membership.objects.create(user=user, repository=team.repository, role=Role.ENGINEER)
    return user


def test_a_second_user_follows_up_on_the_earlier_turns_and_undoes_the_last_one(
    ready_repo, team, inspect_cli, standin, provider
):
    engineer(team, "grace", "Grace", "Hopper")
    engineer(team, "alan", "Alan", "Turing")

    def say(*args: str) -> dict:
        code, out, err = inspect_cli(*args, "--inline", "--json")
        assert code == 0, err
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["state"] == "idle", summary
        return summary

    summary = say(
        "session", "create", "widgets", "--agent", "builtin", "--as", "grace",
        "--prompt", "create notes.txt with hello",
    )  # fmt: skip
    session_id = summary["id"]
    turn1 = standin.model_requests()
    standin.clear()
    say("session", "prompt", str(session_id), "also append world to the file you created",
        "--as", "alan")  # fmt: skip
    turn2 = standin.model_requests()
    standin.clear()
    say("session", "prompt", str(session_id), "undo what you just did", "--as", "alan")
    turn3 = standin.model_requests()

    # What the model was asked to run, turn by turn: each follow-up needed the earlier turns.
    commands = [r.reply.get("command") for r in (*turn1, *turn2, *turn3) if r.reply.get("command")]
    assert commands == [
        "printf '%s\\n' 'hello' > notes.txt",
        "printf '%s\\n' 'world' >> notes.txt",
        "sed -i '$d' notes.txt",
    ]
    # The requests held the earlier turns, with who asked each.
    second = turn2[0].text()
    assert "Request from Grace Hopper (grace):\\n\\ncreate notes.txt with hello" in second
    assert "Request from Alan Turing (alan):\\n\\nalso append world" in second
    third = turn3[0].text()
    assert "'world' >> notes.txt" in third and "Grace Hopper (grace)" in third
    assert "Request from Alan Turing (alan):\\n\\nundo what you just did" in third

    # The workspace ends as turn 1 left it: notes.txt says hello, and only hello.
    diffs = {
        e.payload["turn"]: e.payload
        for e in Event.objects.filter(session_id=session_id, kind="diff").order_by("seq")
        if e.payload["path"] == "notes.txt"
    }
    assert "+hello" in diffs[2]["patch"] and "+world" in diffs[2]["patch"]
    assert "+hello" in diffs[3]["patch"] and "world" not in diffs[3]["patch"]
    assert diffs[3]["added"] == 1

    # Usage: the model, its tokens and cost, on every step.
    usage = [
        e.payload for e in Event.objects.filter(session_id=session_id, kind="usage").order_by("seq")
    ]
    assert len(usage) == 6  # a tool call and a final answer per turn
    for step in usage:
        assert step["model"].startswith(("gpt-4.1", "claude-sonnet-4-5"))
        assert step["input_tokens"] > 0 and step["output_tokens"] > 0 and step["cost_usd"] > 0

    # The stored conversation: JSON, attributed, without the key.
    stored = AgentConversation.objects.get(session_id=session_id)
    authors = [m["author"]["username"] for m in stored.messages if m.get("author")]
    assert authors == ["grace", "alan", "alan"]
    assert UPSTREAM_KEY not in json.dumps(stored.messages)


def test_an_image_attached_on_the_new_task_page_reaches_the_model_as_an_image(
    ready_repo, team, standin, provider
):
    """Through the New task form and the runner: the upload goes to the model as an image
    block of its API (its link stays in the prompt's text)."""
    import base64

    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client
    from django.urls import reverse

    from sessions.models import Session
    from sessions.runner import drive_session
    from tests.dashboard.test_new_task import PNG

    client = Client()
    client.force_login(team.engineer)
    answer = client.post(
        reverse("sessions:new"),
        {"repository": team.repository.pk, "agent": "builtin",
         "prompt": "create notes.txt with hello",
         "images": SimpleUploadedFile("mock up.png", PNG, content_type="image/png")},
    )  # fmt: skip
    assert answer.status_code == 302, answer.content.decode()
    session = Session.objects.get(repository=team.repository)
    drive_session(session.pk)

    first = standin.requests_with_tools()[0]
    data = base64.b64encode(PNG).decode()
    blocks = [
        block
        for message in first.body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
    ]
    if provider == "anthropic":
        images = [b for b in blocks if b.get("type") == "image"]
        assert images and images[0]["source"] == {
            "type": "base64", "media_type": "image/png", "data": data,
        }  # fmt: skip
    else:
        images = [b for b in blocks if b.get("type") == "image_url"]
        assert images and images[0]["image_url"]["url"] == f"data:image/png;base64,{data}"
    assert "/sessions/attachments/" in first.text()  # the link too
    assert Session.objects.get(pk=session.pk).state != "failed"
