"""The real OpenCode CLI (the platform's pinned opencode-ai) in a real sandbox with egress
`none`, against the stand-in model behind the model gateway (the sandbox's door, the turn's token
as each provider's key; every call metered), configured as the platform configures it — for each
provider the platform knows: Anthropic (ANTHROPIC_API_KEY) and an OpenAI-compatible endpoint
(INSPECT_LLM_API_KEY), each key held by the gateway alone.

A turn makes its change; a follow-up by another person, in a sandbox restored from the first
turn's snapshot, continues the same OpenCode session (the model sees turn 1 and who asked); a
model the API refuses fails the turn in the API's own words; usage carries the model, tokens
and cost; images reach the model; nothing reaches for the internet."""

from __future__ import annotations

import base64

import pytest

from sessions.agents import get_runtime
from sessions.agents.base import Author, Conversation, Image, Turn, TurnLimits
from tests.gateway.conftest import UPSTREAM_KEY, wait_for_request
from tests.sessions.agents.opencode_sandbox import PROVIDERS, configure

# The turn's token is committed: the gateway process checks it through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)

ADA = Author(username="ada", name="Ada Engineer", email="ada@example.com")
BOB = Author(username="bob", name="Bob Reviewer", email="bob@example.com")
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}
REFUSALS = {
    "anthropic": "model: claude-nope",
    "openai": "The model `gpt-nope` does not exist or you do not have access to it.",
}
FILES = {"README.md": "# widgets\n", "AGENTS.md": "Always keep notes short.\n"}
# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture(params=PROVIDERS)
def world(request, settings, gateway_boxes):
    """(provider, stand-in, create, sandbox, runtime) with the platform configured for that
    provider; `runtime(model="")` is OpenCode for a new turn, as the runner builds it."""
    sandboxes = gateway_boxes
    box = sandboxes.create(FILES, git="none")
    box.run(["git", "init", "-q", "."], timeout=60)
    # Only the provider's key is configured (the gateway holds it; OpenCode gets the token).
    configure(settings, request.param, "", UPSTREAM_KEY, MODELS[request.param])

    def runtime(model: str = ""):
        return get_runtime("opencode", route=sandboxes.turn_route("opencode"), model=model)

    yield request.param, sandboxes.standin, sandboxes.restore, box, runtime
    for session in sandboxes.sessions:  # every turn's calls are metered
        assert {r.runtime for r in wait_for_request(session)} == {"opencode"}


def turn(box, prompt, author, conversation, **kwargs) -> Turn:
    return Turn(
        sandbox=box,
        prompt=prompt,
        author=author,
        conversation=conversation,
        limits=TurnLimits(wall_seconds=300),
        **kwargs,
    )


def summary(events) -> list:
    return [(e.kind, e.data) for e in events if e.kind not in ("output",)]


def test_a_change_then_another_persons_undo_continue_one_opencode_session(world):
    provider, standin, create, box, runtime = world
    conversation = Conversation()

    first = list(runtime().run(turn(box, "create notes.txt with hello", ADA, conversation)))
    assert "failed" not in first[-1].data, summary(first)
    assert box.read_file("notes.txt") == b"hello\n"
    assert conversation.resume_id.startswith("ses_")
    tools = standin.requests_with_tools()
    assert tools and all(r.model == MODELS[provider] for r in standin.model_requests())
    # The repository's instructions reach the model (OpenCode is not left to find them).
    assert "Always keep notes short." in tools[0].text()
    assert "Request from Ada Engineer (ada)" in tools[0].text()
    # Usage: the model, its tokens and what they cost.
    usage = [e.data for e in first if e.kind == "usage"]
    assert usage and all(u["model"] == MODELS[provider] for u in usage)
    assert all(u["input_tokens"] > 0 and u["output_tokens"] > 0 for u in usage)
    assert all(u["cost_usd"] and u["cost_usd"] > 0 for u in usage)
    # Nothing reached for the internet (models.dev, npm, updates, sharing).
    assert box.egress_refusals() == []

    # The next turn runs in a sandbox restored from this one's snapshot, as a session's does.
    second_box = create(box.snapshot())
    standin.clear()
    second = list(runtime().run(turn(second_box, "undo what you just did", BOB, conversation)))
    assert "failed" not in second[-1].data, summary(second)
    assert second_box.run(["test", "-e", "notes.txt"], timeout=30).exit_code == 1
    request = standin.requests_with_tools()[0]
    body = request.text()
    assert "create notes.txt with hello" in body and "Request from Bob Reviewer (bob)" in body
    assert "'hello' > notes.txt" in body  # turn 1's own tool call
    assert standin.tool_calls()[0] in ("rm -f notes.txt", "rm notes.txt")
    assert second_box.egress_refusals() == []


def test_a_model_the_api_refuses_fails_the_turn_in_the_apis_own_words(world):
    provider, standin, _, box, runtime = world
    model = {"anthropic": "claude-nope", "openai": "gpt-nope"}[provider]
    events = list(runtime(model).run(turn(box, "create notes.txt with hello", ADA, Conversation())))
    failed = events[-1].data["failed"]
    assert failed == f"OpenCode: {REFUSALS[provider]} (HTTP 404)"
    assert [e.data["message"] for e in events if e.kind == "error"] == [failed]
    # The request reached the API (OpenCode did not refuse the name itself), once.
    assert [r.model for r in standin.model_requests()] == [model]
    assert box.run(["test", "-e", "notes.txt"], timeout=30).exit_code == 1


def test_images_on_the_prompt_reach_the_model(world):
    _, standin, _, box, runtime = world
    image = Image(name="screen shot.png", media_type="image/png", data=PNG)
    events = list(
        runtime().run(turn(box, "what is in this picture", ADA, Conversation(), images=(image,)))
    )
    assert "failed" not in events[-1].data, summary(events)
    (request,) = standin.model_requests()
    assert base64.b64encode(PNG).decode() in request.text()
    assert "image/png" in request.text()
    # The attachment is not left in the repository's working tree.
    status = box.run(["git", "status", "--porcelain"], timeout=30)
    assert status.exit_code == 0 and "png" not in status.stdout


def test_a_session_whose_state_was_lost_starts_a_new_one_and_says_so(world):
    provider, standin, _, box, runtime = world
    conversation = Conversation(resume_id="ses_0123456789abcdefGHIJKLMNOP")
    events = list(runtime().run(turn(box, "create notes.txt with hello", ADA, conversation)))
    assert "failed" not in events[-1].data, summary(events)
    notices = [e.data["message"] for e in events if e.kind == "notice"]
    assert any(n.startswith("could not resume the earlier conversation") for n in notices)
    assert [e for e in events if e.kind == "error"] == []
    assert box.read_file("notes.txt") == b"hello\n"
    assert conversation.resume_id.startswith("ses_")
    assert conversation.resume_id != "ses_0123456789abcdefGHIJKLMNOP"
