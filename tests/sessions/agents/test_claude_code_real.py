"""The real Claude Code (the platform's pinned @anthropic-ai/claude-code) in a real sandbox with
egress `none`, against the stand-in model (tests/standin_model/) through the model gateway (its
door in the sandbox, the turn's token as its key; every call metered): a change, a second
person's follow-up that undoes it in the same conversation (resumed from the state the snapshot
carried), a conversation whose state was lost, a model the API refuses, usage, and images."""

from __future__ import annotations

import base64
import os
import time

import pytest

from sessions.agents.base import AgentEvent, Author, Conversation, Image, Turn
from sessions.agents.claude_code import ClaudeCodeAgent, process_env
from tests.gateway.conftest import UPSTREAM_KEY, wait_for_request
from tests.sessions.agents.conftest import of_kind
from tests.standin_model import NO_UNDO

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
    # The turn's token is committed: the gateway process checks it through its own connection.
    pytest.mark.django_db(transaction=True),
]

ADA = Author(username="ada", name="Ada Engineer", email="ada@example.com")
BOB = Author(username="bob", name="Bob Reviewer", email="bob@example.com")
CREATE = "printf '%s\\n' 'hello' > notes.txt"
STATE = "/workspace/.git/inspect-agent/claude-code"
# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@pytest.fixture
def sandboxes(gateway_boxes):
    return gateway_boxes


def agent(sandboxes, model: str = "claude-sonnet-4-5") -> ClaudeCodeAgent:
    """Claude Code for a new turn: the gateway as its API, the turn's token as its key."""
    return ClaudeCodeAgent(env=process_env(sandboxes.turn_route("claude-code")), model=model)


def run(runtime: ClaudeCodeAgent, turn: Turn) -> list[AgentEvent]:
    events = list(runtime.run(turn))
    assert events[-1].kind == "done"
    return events


def tool_uses(body: dict) -> list[str]:
    return [
        block["input"].get("command", "")
        for message in body["messages"]
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def user_text(body: dict) -> str:
    """All text the user messages of a request hold (prompts, as the model reads them)."""
    return "\n".join(
        block.get("text", "") if isinstance(block, dict) else str(block)
        for message in body["messages"]
        if message["role"] == "user"
        for block in (
            message["content"] if isinstance(message["content"], list) else [message["content"]]
        )
    )


def test_a_second_person_undoes_the_first_turn_in_the_resumed_conversation(sandboxes):
    box = sandboxes.create({"README.md": "# widgets\n"})
    conversation = Conversation()
    first = run(
        agent(sandboxes),
        Turn(box, "create notes.txt with hello", ADA, conversation=conversation),
    )
    assert "failed" not in first[-1].data, first[-1].data
    assert box.read_file("notes.txt") == b"hello\n"
    assert of_kind(first, "tool_call")[0]["arguments"]["command"] == CREATE
    assert of_kind(first, "message")[-1] == {"text": "Done: created notes.txt"}
    session_id = conversation.resume_id
    assert len(session_id) == 36, session_id  # Claude Code's session UUID

    # The next turn starts from the session's snapshot, as the runner's does.
    second_box = sandboxes.restore(box.snapshot())
    sandboxes.standin.clear()
    runtime = agent(sandboxes)
    turn = Turn(second_box, "undo what you just did", BOB, conversation=conversation)
    assert f"--resume {session_id}" in runtime.process_command(turn)
    second = run(runtime, turn)

    assert "failed" not in second[-1].data, second[-1].data
    assert not of_kind(second, "notice")
    assert second_box.run(["test", "-e", "notes.txt"]).exit_code == 1
    assert sandboxes.standin.tool_calls() == ["rm notes.txt"]
    request = sandboxes.standin.requests_with_tools()[0]
    assert tool_uses(request.body) == [CREATE]  # turn 1, from the resumed conversation
    prompts = user_text(request.body)
    assert "Request from Ada Engineer (ada):\n\ncreate notes.txt with hello" in prompts
    assert "Request from Bob Reviewer (bob):\n\nundo what you just did" in prompts
    assert conversation.resume_id == session_id
    # Each turn's calls were metered under its own token's session; the provider saw the
    # platform's key, never the token.
    for session in sandboxes.sessions:
        assert {r.runtime for r in wait_for_request(session)} == {"claude-code"}
    assert {r.headers.get("x-api-key") for r in sandboxes.standin.model_requests()} == {
        UPSTREAM_KEY
    }


def test_a_conversation_whose_state_was_lost_starts_anew_and_says_so(sandboxes):
    box = sandboxes.create({"README.md": "# widgets\n"})
    conversation = Conversation()
    run(agent(sandboxes), Turn(box, "create notes.txt with hello", ADA, conversation=conversation))
    lost = conversation.resume_id
    assert box.run(["rm", "-rf", STATE]).exit_code == 0

    events = run(
        agent(sandboxes), Turn(box, "undo what you just did", BOB, conversation=conversation)
    )
    assert of_kind(events, "notice") == [
        {
            "message": "could not resume the earlier conversation: No conversation found with "
            f"session ID: {lost}; starting a new one"
        }
    ]
    assert not of_kind(events, "error")
    assert events[-1].data == {"exit_code": 0}
    # The new conversation does not know turn 1, and says so; nothing was undone.
    assert of_kind(events, "message")[-1] == {"text": NO_UNDO}
    assert box.read_file("notes.txt") == b"hello\n"
    assert conversation.resume_id and conversation.resume_id != lost


def test_another_runtimes_session_id_is_not_resumed_and_says_so(sandboxes):
    """A session that switched agents holds the earlier CLI's id (here OpenCode's)."""
    box = sandboxes.create({"README.md": "# widgets\n"})
    conversation = Conversation(resume_id="ses_4f2a9c1e")
    events = run(
        agent(sandboxes), Turn(box, "create notes.txt with hello", ADA, conversation=conversation)
    )
    (notice,) = of_kind(events, "notice")
    assert notice["message"].startswith(
        "could not resume the earlier conversation: Error: --resume requires a valid session ID"
    )
    assert notice["message"].endswith("; starting a new one")
    assert events[-1].data == {"exit_code": 0}
    assert box.read_file("notes.txt") == b"hello\n"
    assert len(conversation.resume_id) == 36


def test_a_model_the_api_refuses_fails_the_turn_with_claude_codes_and_the_apis_words(sandboxes):
    box = sandboxes.create({"README.md": "# widgets\n"})
    started = time.monotonic()
    events = run(
        agent(sandboxes, model="no-such-model"), Turn(box, "create notes.txt with hi", ADA)
    )
    assert time.monotonic() - started < 60  # refused at once, not retried
    failed = events[-1].data["failed"]
    assert failed == (
        "Claude Code: There's an issue with the selected model (no-such-model). It may not "
        "exist or you may not have access to it. Run --model to pick a different model. "
        "(API error 404 model_not_found)"
    )
    assert of_kind(events, "error") == [{"message": failed}]
    assert not of_kind(events, "message")  # Claude Code's text is the failure, not a reply
    (usage,) = of_kind(events, "usage")
    assert usage["model"] == "no-such-model"
    assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (0, 0, 0)
    asked = sandboxes.standin.model_requests()
    assert asked and {r.status for r in asked} == {404}
    assert box.run(["test", "-e", "notes.txt"]).exit_code == 1


def test_usage_names_the_model_and_counts_tokens_and_cost(sandboxes):
    box = sandboxes.create({"README.md": "# widgets\n"})
    events = run(agent(sandboxes), Turn(box, "create notes.txt with hello", ADA))
    (usage,) = of_kind(events, "usage")
    assert usage["provider"] == "anthropic" and usage["model"] == "claude-sonnet-4-5"
    assert usage["input_tokens"] > 1000 and usage["output_tokens"] > 0
    assert usage["steps"] == 2  # the tool call, then the reply
    # Claude Code prices Sonnet 4.5 at $3 / $15 per million input / output tokens.
    expected = usage["input_tokens"] * 3e-6 + usage["output_tokens"] * 15e-6
    assert usage["cost_usd"] == pytest.approx(expected, rel=1e-6)


def test_the_turns_cost_limit_stops_claude_code_after_the_call_that_crossed_it(sandboxes):
    from sessions.agents.base import TurnLimits

    box = sandboxes.create({"README.md": "# widgets\n"})
    turn = Turn(box, "create notes.txt with hello", ADA, limits=TurnLimits(cost_usd=0.01))
    events = run(agent(sandboxes), turn)
    # The first call (the tool call) already costs more: no second one is made.
    assert len(sandboxes.standin.requests_with_tools()) == 1
    limits = [e.data for e in events if e.kind == "error" and e.data.get("limit")]
    assert limits and limits[0]["limit"] == "cost", [(e.kind, e.data) for e in events]
    assert "its limit is $0.01" in limits[0]["message"]


def test_images_reach_the_model_as_image_blocks(sandboxes):
    box = sandboxes.create({"README.md": "# widgets\n"})
    turn = Turn(
        box,
        "create notes.txt with hello",
        ADA,
        images=(Image(name="dot.png", media_type="image/png", data=PNG),),
    )
    events = run(agent(sandboxes), turn)
    assert "failed" not in events[-1].data, events[-1].data
    assert box.read_file("notes.txt") == b"hello\n"
    first = sandboxes.standin.requests_with_tools()[0]
    user = first.body["messages"][0]["content"]
    images = [b for b in user if b.get("type") == "image"]
    assert [b["source"]["media_type"] for b in images] == ["image/png"]
    assert base64.b64decode(images[0]["source"]["data"]) == PNG
    assert "Request from Ada Engineer (ada):\n\ncreate notes.txt with hello" in user_text(
        first.body
    )
    # The prompt file is gone after the run.
    assert box.run(["/bin/sh", "-c", f"ls {STATE}/prompt"]).exit_code != 0
