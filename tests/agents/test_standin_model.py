"""The stand-in model server (tests/standin_model.py) driven with plain HTTP, as each provider's
clients drive the real APIs: streaming and not, a tool call, its result, the final text, undo from
the conversation's history, a refused model and a wrong key."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.standin_model import NO_UNDO, TITLE, StandinModel, iter_sse

KEY = "sk-standin-test"
CREATE = "printf '%s\\n' 'hello' > notes.txt"


@pytest.fixture(scope="module")
def standin():
    with StandinModel(key=KEY) as server:
        yield server


def call(
    standin: StandinModel,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    key: str | None = KEY,
    anthropic: bool = False,
    method: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes, dict[str, str]]:
    hdrs = {"content-type": "application/json", **(headers or {})}
    if key is not None:
        if anthropic:
            hdrs["x-api-key"] = key
            hdrs["anthropic-version"] = "2023-06-01"
        else:
            hdrs["authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(standin.url + path, data=data, headers=hdrs, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, err.read(), {k.lower(): v for k, v in err.headers.items()}


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    return [(e, d if d == "[DONE]" else json.loads(d)) for e, d in iter_sse(raw)]


# -- Anthropic Messages ----------------------------------------------------------------------
BASH = {
    "name": "Bash",
    "description": "Run a command",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "description": {"type": "string"},
            "timeout": {"type": "number"},
        },
        "required": ["command", "description"],
    },
}


def anthropic_body(messages: list[dict[str, Any]], *, stream: bool = False, **kw: Any) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": messages,
        "tools": [BASH],
        "stream": stream,
        **kw,
    }


def user(text: str) -> dict[str, Any]:
    # Claude Code wraps the prompt among reminder blocks.
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>be careful</system-reminder>"},
            {"type": "text", "text": text},
        ],
    }


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


# -- recording -------------------------------------------------------------------------------
def test_every_request_is_recorded_with_headers_and_body():
    with StandinModel(key=None) as standin:  # any key accepted
        call(
            standin,
            "/v1/messages",
            anthropic_body([user("create a.txt with x")]),
            key="whatever",
            anthropic=True,
        )
        call(
            standin,
            "/v1/chat/completions",
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": "title please"}]},
        )
        recorded = standin.requests
        assert [r.api for r in recorded] == ["anthropic", "chat"]
        assert recorded[0].headers["x-api-key"] == "whatever"
        assert recorded[0].model == "claude-sonnet-4-5" and recorded[0].status == 200
        assert [r.api for r in standin.requests_with_tools()] == ["anthropic"]
        assert standin.tool_calls() == ["printf '%s\\n' 'x' > a.txt"]
        assert "create a.txt with x" in recorded[0].text()


# -- from a sandbox --------------------------------------------------------------------------
SANDBOX_CLIENT = r"""
import json, os, sys, urllib.request
url, key = sys.argv[1], sys.argv[2]
body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
        "messages": [{"role": "user", "content": "hello from the sandbox"}]}
req = urllib.request.Request(url + "/v1/messages", data=json.dumps(body).encode(),
    headers={"x-api-key": key, "anthropic-version": "2023-06-01",
             "content-type": "application/json"})
with urllib.request.urlopen(req, timeout=20) as resp:  # through HTTP_PROXY, as the CLIs go
    text = resp.read().decode()
    print(os.environ.get("HTTP_PROXY"), resp.status, text.rstrip().splitlines()[-2])
"""


def test_an_allowlist_sandbox_reaches_the_standin_through_its_egress_proxy(tmp_path):
    """What the CLI tests rely on: a name only the sandbox's proxy resolves, and an operator
    exception for the stand-in's address and port (loopback is refused otherwise)."""
    from snapshots.sandbox.base import Limits, NetworkPolicy
    from snapshots.sandbox.local import LocalBackend
    from tests.security.test_sandbox_network import _skip_reason

    if reason := _skip_reason("bwrap"):
        pytest.skip(reason)
    src = tmp_path / "src"
    src.mkdir()
    (src / "client.py").write_text(SANDBOX_CLIENT)
    with StandinModel(key=KEY) as standin:
        route = standin.sandbox_route()
        backend = LocalBackend(
            tmp_path / "sandboxes",
            egress_hosts=route.egress_hosts,
            egress_exceptions=route.egress_exceptions,
        )
        snap = backend.snapshot_from_directory(str(src))
        box = backend.create(
            snapshot=snap,
            network=NetworkPolicy("allowlist", (route.name,)),
            limits=Limits(wall_seconds=60, memory_mb=512, pids=64),
        )
        try:
            result = box.run(["python3", "client.py", route.url, KEY], timeout=30)
        finally:
            box.terminate()
        assert result.stdout.split() == [
            "http://127.0.0.1:3128",
            "200",
            "event:",
            "message_stop",
        ], result.stderr
        (seen,) = standin.model_requests()
        assert seen.headers["host"] == f"{route.name}:{standin.port}"
        assert seen.reply == {"text": TITLE}
