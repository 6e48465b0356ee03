"""The stand-in model's OpenAI Chat Completions and Responses APIs driven with plain HTTP:
streaming and not, a tool call, its result, the final text, undo from the conversation's history
(and from ``previous_response_id``), a refused model, a wrong key and a refused websocket."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.sessions.agents.standin_http import CREATE, KEY, call, events
from tests.standin_model import NO_UNDO, StandinModel


@pytest.fixture(scope="module")
def standin():
    with StandinModel(key=KEY) as server:
        yield server


# -- OpenAI Chat Completions -----------------------------------------------------------------
SHELL_FN = {
    "type": "function",
    "function": {
        "name": "shell",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}},
                "workdir": {"type": "string"},
            },
            "required": ["command", "workdir"],
        },
    },
}


def chat_body(messages: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return {"model": "gpt-4.1", "messages": messages, "tools": [SHELL_FN], **kw}


def test_chat_turn_tool_call_then_result_then_final_text(standin):
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [{"type": "text", "text": "create notes.txt with hello"}]},
    ]
    status, raw, headers = call(standin, "/v1/chat/completions", chat_body(messages))
    assert status == 200 and "x-request-id" in headers
    completion = json.loads(raw)
    assert completion["object"] == "chat.completion" and completion["model"] == "gpt-4.1"
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (tc,) = choice["message"]["tool_calls"]
    assert tc["function"]["name"] == "shell"
    # An argv-typed `command` gets an argv; the required workdir a sensible value.
    assert json.loads(tc["function"]["arguments"]) == {
        "command": ["bash", "-lc", CREATE],
        "workdir": ".",
    }
    usage = completion["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]

    messages += [
        choice["message"],
        {"role": "tool", "tool_call_id": tc["id"], "content": ""},
    ]
    _, raw, _ = call(standin, "/chat/completions", chat_body(messages))  # no /v1 works too
    final = json.loads(raw)["choices"][0]
    assert final["finish_reason"] == "stop"
    assert final["message"]["content"] == "Done: created notes.txt"


def test_chat_stream_tool_call_deltas_usage_chunk_and_done(standin):
    body = chat_body(
        [{"role": "user", "content": "create notes.txt with hello"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    status, raw, _ = call(standin, "/v1/chat/completions", body)
    assert status == 200
    evs = [d for _, d in events(raw)]
    assert evs[-1] == "[DONE]"
    chunks = evs[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    calls = [
        tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []
    ]
    assert calls[0]["id"].startswith("call_") and calls[0]["function"]["name"] == "shell"
    arguments = "".join(tc["function"]["arguments"] for tc in calls)
    assert json.loads(arguments)["command"] == ["bash", "-lc", CREATE]
    finish = [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]]
    assert finish == ["tool_calls"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0


def test_chat_stream_without_usage_option_sends_no_usage_chunk(standin):
    body = chat_body([{"role": "user", "content": "what is this repo?"}], stream=True)
    _, raw, _ = call(standin, "/v1/chat/completions", body)
    chunks = [d for _, d in events(raw)][:-1]
    assert all("usage" not in c for c in chunks)
    text = "".join(ch["delta"].get("content") or "" for c in chunks for ch in c["choices"])
    assert "no instruction" in text


def test_chat_undo_an_append_from_history(standin):
    append = "printf '%s\\n' 'more' >> notes.txt"
    messages = [
        {"role": "user", "content": "append more to notes.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "shell",
                        "arguments": json.dumps({"command": ["bash", "-lc", append]}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "assistant", "content": "Done"},
        {"role": "user", "content": "undo what you just did"},
    ]
    _, raw, _ = call(standin, "/v1/chat/completions", chat_body(messages))
    (tc,) = json.loads(raw)["choices"][0]["message"]["tool_calls"]
    assert json.loads(tc["function"]["arguments"])["command"][-1] == "sed -i '$d' notes.txt"


def test_chat_append_to_the_file_created_earlier_needs_the_earlier_turn(standin):
    create = "printf '%s\\n' 'hello' > notes.txt"
    follow_up = {"role": "user", "content": "also append world to the file you created"}
    messages = [
        {"role": "user", "content": "create notes.txt with hello"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "shell", "arguments": json.dumps({"command": create})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "assistant", "content": "Done"},
        follow_up,
    ]
    _, raw, _ = call(standin, "/v1/chat/completions", chat_body(messages))
    (tc,) = json.loads(raw)["choices"][0]["message"]["tool_calls"]
    assert json.loads(tc["function"]["arguments"])["command"][-1] == (
        "printf '%s\\n' 'world' >> notes.txt"
    )
    _, raw, _ = call(standin, "/v1/chat/completions", chat_body([follow_up]))
    message = json.loads(raw)["choices"][0]["message"]
    assert message["content"] == "I can find no file created earlier in this conversation."
    assert not message.get("tool_calls")


def test_openai_refuses_an_unknown_model_and_a_wrong_key_in_its_format(standin):
    body = chat_body([{"role": "user", "content": "hi"}], model="gpt-nope")
    status, raw, _ = call(standin, "/v1/chat/completions", body)
    assert status == 404
    assert json.loads(raw) == {
        "error": {
            "message": "The model `gpt-nope` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    status, raw, _ = call(
        standin, "/v1/responses", {"model": "gpt-5", "input": "hi"}, key="sk-wrong"
    )
    assert status == 401
    error = json.loads(raw)["error"]
    assert error["code"] == "invalid_api_key" and "sk-wrong" not in error["message"]
    status, _, _ = call(standin, "/v1/chat/completions", body, key=None)
    assert status == 401


def test_openai_models_listing(standin):
    status, raw, _ = call(standin, "/v1/models")
    listing = json.loads(raw)
    assert status == 200 and listing["object"] == "list"
    assert "gpt-5-codex" in {m["id"] for m in listing["data"]}


# -- OpenAI Responses ------------------------------------------------------------------------
EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
        "required": ["cmd"],
    },
}


def responses_body(items: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return {"model": "gpt-5-codex", "input": items, "tools": [EXEC_COMMAND], "stream": True, **kw}


def said(text: str, role: str = "user") -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def test_responses_stream_function_call_then_output_then_final_text(standin):
    items = [
        said("<environment_context>cwd</environment_context>"),
        said("create notes.txt with hello"),
    ]
    status, raw, _ = call(standin, "/v1/responses", responses_body(items))
    assert status == 200
    evs = events(raw)
    names = [e for e, _ in evs]
    assert names[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert names[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in evs] == list(range(len(evs)))
    added = evs[2][1]["item"]
    assert added["type"] == "function_call" and added["name"] == "exec_command"
    args = "".join(d["delta"] for e, d in evs if e == "response.function_call_arguments.delta")
    assert json.loads(args) == {"cmd": CREATE}
    done = next(d["item"] for e, d in evs if e == "response.output_item.done")
    assert done["status"] == "completed" and json.loads(done["arguments"]) == {"cmd": CREATE}
    completed = evs[-1][1]["response"]
    assert completed["status"] == "completed" and completed["model"] == "gpt-5-codex"
    usage = completed["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}

    items += [
        done,
        {
            "type": "function_call_output",
            "call_id": done["call_id"],
            "output": "Process exited with code 0\nOutput:\n",
        },
    ]
    _, raw, _ = call(standin, "/v1/responses", responses_body(items))
    evs = events(raw)
    text = "".join(d["delta"] for e, d in evs if e == "response.output_text.delta")
    assert text == "Done: created notes.txt"
    message = evs[-1][1]["response"]["output"][0]
    assert message["content"][0]["text"] == text


def test_responses_final_text_reports_a_failed_command(standin):
    items = [
        said("create notes.txt with hello"),
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": CREATE}),
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": "Process exited with code 1\nOutput:\nPermission denied",
        },
    ]
    _, raw, _ = call(standin, "/v1/responses", responses_body(items, stream=False))
    response = json.loads(raw)
    assert response["object"] == "response"
    assert response["output"][0]["content"][0]["text"].startswith("The command failed")


def test_responses_freeform_tool_and_undo_from_custom_tool_call_history(standin):
    custom = {"type": "custom", "name": "shell_command", "description": "Run a shell command"}
    body = responses_body([said("create notes.txt with hello")], tools=[custom])
    _, raw, _ = call(standin, "/v1/responses", body)
    evs = events(raw)
    done = next(d["item"] for e, d in evs if e == "response.output_item.done")
    assert done["type"] == "custom_tool_call" and done["input"] == CREATE
    joined = "".join(d["delta"] for e, d in evs if e == "response.custom_tool_call_input.delta")
    assert joined == CREATE

    history = [
        said("create notes.txt with hello"),
        done,
        {"type": "custom_tool_call_output", "call_id": done["call_id"], "output": "ok"},
        said("undo what you just did"),
    ]
    _, raw, _ = call(
        standin, "/v1/responses", responses_body(history, tools=[custom], stream=False)
    )
    (item,) = json.loads(raw)["output"]
    assert item == item | {"type": "custom_tool_call", "input": "rm notes.txt"}


def test_responses_codex_code_mode_exec_gets_javascript(standin):
    """Codex's code mode offers tools in an ``additional_tools`` input item: one freeform
    ``exec`` taking JavaScript that calls nested tools."""
    exec_tool = {
        "type": "custom",
        "name": "exec",
        "description": "Run JavaScript … `await tools.exec_command(...)` …",
    }
    item = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [{"type": "namespace", "name": "functions", "tools": [exec_tool]}],
    }
    body = responses_body([item, said("create notes.txt with hello")], tools=[], stream=False)
    _, raw, _ = call(standin, "/v1/responses", body)
    (out,) = json.loads(raw)["output"]
    assert out["type"] == "custom_tool_call" and out["name"] == "exec"
    assert out["input"].startswith(
        f"const r = await tools.exec_command({{cmd: {json.dumps(CREATE)}}})"
    )
    assert standin.requests[-1].has_tools

    # Turn 2 finds its own command inside the JavaScript it sent.
    history = [
        item,
        said("create notes.txt with hello"),
        out,
        {
            "type": "custom_tool_call_output",
            "call_id": out["call_id"],
            "output": [{"type": "input_text", "text": "Script completed\nOutput:\n"}],
        },
        said("undo what you just did"),
    ]
    _, raw, _ = call(standin, "/v1/responses", responses_body(history, tools=[], stream=False))
    (undo,) = json.loads(raw)["output"]
    assert undo["input"].startswith('const r = await tools.exec_command({cmd: "rm notes.txt"})')


def test_responses_undo_without_history_and_with_previous_response_id(standin):
    _, raw, _ = call(
        standin, "/v1/responses", responses_body([said("undo what you just did")], stream=False)
    )
    (message,) = json.loads(raw)["output"]
    assert message["content"][0]["text"] == NO_UNDO

    # A client that keeps state on the server sends only the new items.
    _, raw, _ = call(
        standin, "/v1/responses", responses_body([said("append bye to notes.txt")], stream=False)
    )
    first = json.loads(raw)
    (fc,) = first["output"]
    follow = [
        {"type": "function_call_output", "call_id": fc["call_id"], "output": "ok"},
        said("undo what you just did"),
    ]
    _, raw, _ = call(
        standin,
        "/v1/responses",
        responses_body(follow, stream=False, previous_response_id=first["id"]),
    )
    (undo,) = json.loads(raw)["output"]
    assert json.loads(undo["arguments"]) == {"cmd": "sed -i '$d' notes.txt"}


def test_responses_refuses_websocket_upgrades_so_clients_fall_back(standin):
    status, _, _ = call(
        standin,
        "/v1/responses",
        method="GET",
        headers={
            "connection": "Upgrade",
            "upgrade": "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    assert status == 426
