"""The stand-in model's Anthropic Messages API driven with plain HTTP: streaming and not, a tool
call, its result, the final text, undo from the conversation's history, a refused model and a
wrong key."""

from __future__ import annotations

import json

import pytest

from tests.sessions.agents.standin_http import CREATE, KEY, anthropic_body, call, events, user
from tests.standin_model import NO_UNDO, TITLE, StandinModel


@pytest.fixture(scope="module")
def standin():
    with StandinModel(key=KEY) as server:
        yield server


def test_anthropic_turn_tool_call_then_result_then_final_text(standin):
    status, raw, headers = call(
        standin,
        "/v1/messages",
        anthropic_body([user("create notes.txt with hello")]),
        anthropic=True,
    )
    assert status == 200 and "request-id" in headers
    message = json.loads(raw)
    assert message["type"] == "message" and message["model"] == "claude-sonnet-4-5"
    assert message["stop_reason"] == "tool_use"
    (block,) = message["content"]
    assert block["type"] == "tool_use" and block["name"] == "Bash"
    # Built from the schema: the command, and a value for the other required property.
    assert block["input"] == {"command": CREATE, "description": "run the change"}
    assert message["usage"]["input_tokens"] > 10 and message["usage"]["output_tokens"] > 0

    history = [
        user("create notes.txt with hello"),
        {"role": "assistant", "content": message["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": ""}],
        },
    ]
    status, raw, _ = call(standin, "/v1/messages", anthropic_body(history), anthropic=True)
    final = json.loads(raw)
    assert final["stop_reason"] == "end_turn"
    assert final["content"] == [{"type": "text", "text": "Done: created notes.txt"}]


def test_anthropic_stream_has_the_documented_events_and_joins_to_the_call(standin):
    status, raw, headers = call(
        standin,
        "/v1/messages?beta=true",
        anthropic_body([user("append second line to notes.txt")], stream=True),
        anthropic=True,
    )
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    evs = events(raw)
    names = [e for e, _ in evs]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert "ping" in names and "content_block_stop" in names
    assert all(e == d["type"] for e, d in evs)
    start = evs[0][1]["message"]
    assert start["model"] == "claude-sonnet-4-5" and start["usage"]["input_tokens"] > 0
    block = next(d["content_block"] for e, d in evs if e == "content_block_start")
    assert block["type"] == "tool_use" and block["input"] == {}
    partial = "".join(
        d["delta"]["partial_json"]
        for e, d in evs
        if e == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial)["command"] == "printf '%s\\n' 'second line' >> notes.txt"
    delta = next(d for e, d in evs if e == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0


def test_anthropic_undo_uses_the_earlier_turn_and_says_so_without_one(standin):
    turn1 = [
        user("create notes.txt with hello"),
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": CREATE}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done: created notes.txt"}]},
    ]
    _, raw, _ = call(
        standin,
        "/v1/messages",
        anthropic_body([*turn1, user("Please UNDO what you just did.")]),
        anthropic=True,
    )
    (block,) = json.loads(raw)["content"]
    assert block["input"]["command"] == "rm notes.txt"

    _, raw, _ = call(
        standin, "/v1/messages", anthropic_body([user("undo what you just did")]), anthropic=True
    )
    message = json.loads(raw)
    assert message["content"] == [{"type": "text", "text": NO_UNDO}]
    assert message["stop_reason"] == "end_turn"


def test_anthropic_final_text_reports_a_tool_result_marked_as_an_error(standin):
    history = [
        user("create notes.txt with hello"),
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": CREATE}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": True,
                    "content": "Permission denied",
                }
            ],
        },
    ]
    _, raw, _ = call(standin, "/v1/messages", anthropic_body(history), anthropic=True)
    (block,) = json.loads(raw)["content"]
    assert block["text"] == "The command failed: Permission denied"


def test_anthropic_title_request_without_tools_gets_plain_text(standin):
    body = {
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "create notes.txt with hello"}],
    }
    _, raw, _ = call(standin, "/v1/messages", body, anthropic=True)
    assert json.loads(raw)["content"] == [{"type": "text", "text": TITLE}]


def test_anthropic_refuses_an_unknown_model_and_a_wrong_key_in_its_format(standin):
    body = anthropic_body([user("hi")], model="claude-nope-1")
    status, raw, _ = call(standin, "/v1/messages", body, anthropic=True)
    assert status == 404
    assert json.loads(raw) == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: claude-nope-1"},
    }
    status, raw, _ = call(
        standin, "/v1/messages", anthropic_body([user("hi")]), key="sk-wrong", anthropic=True
    )
    assert status == 401 and json.loads(raw)["error"]["type"] == "authentication_error"


def test_anthropic_count_tokens_and_models(standin):
    body = anthropic_body([user("hello there")])
    status, raw, _ = call(standin, "/v1/messages/count_tokens", body, anthropic=True)
    assert status == 200 and json.loads(raw)["input_tokens"] > 10
    status, raw, _ = call(standin, "/v1/models", anthropic=True)
    assert status == 200
    listing = json.loads(raw)
    assert {"type": "model", "id": "claude-sonnet-4-5"}.items() <= listing["data"][0].items()
