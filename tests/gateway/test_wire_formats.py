"""Each provider's wire format through the gateway process, streaming and not, metered: what a
runtime gets is what the provider sent, and every request is recorded with its tokens."""

from __future__ import annotations

import hashlib
import json

from tests.gateway.conftest import (
    ANTHROPIC_HEADERS,
    UPSTREAM_KEY,
    anthropic_body,
    wait_for_request,
)
from tests.standin_model import iter_sse

TOOLS_ANTHROPIC = [
    {
        "name": "Bash",
        "description": "run a command",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]
TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]
SCHEMA = TOOLS_OPENAI[0]["function"]["parameters"]
ASK = "create notes.txt with hello"


def test_anthropic_messages_non_streaming_with_a_tool_call(gateway, fresh_upstream, mint):
    token, session = mint()
    body = anthropic_body(tools=TOOLS_ANTHROPIC, messages=[{"role": "user", "content": ASK}])
    with gateway.client() as client:
        answer = client.post(
            "/anthropic/v1/messages", json=body, headers={**ANTHROPIC_HEADERS, "x-api-key": token}
        )
    assert answer.status_code == 200, answer.text
    message = answer.json()
    tool = [b for b in message["content"] if b["type"] == "tool_use"][0]
    assert tool["name"] == "Bash" and "notes.txt" in tool["input"]["command"]

    seen = fresh_upstream.requests[-1]
    assert seen.headers["x-api-key"] == UPSTREAM_KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.body == body

    (row,) = wait_for_request(session)
    assert (row.provider, row.endpoint, row.model, row.stream) == (
        "anthropic", "messages", "claude-sonnet-4-5", False,
    )  # fmt: skip
    assert (row.status, row.outcome) == (200, "ok")
    assert row.input_tokens == message["usage"]["input_tokens"] > 0
    assert row.output_tokens == message["usage"]["output_tokens"] > 0
    assert row.response_sha256 == hashlib.sha256(answer.content).hexdigest()
    assert row.response_bytes == len(answer.content)
    assert row.runtime == "claude-code" and row.user_id == session.creator_id
    assert row.latency_ms > 0 and row.first_byte_ms is not None


def test_anthropic_messages_stream_pass_through(gateway, fresh_upstream, mint):
    token, session = mint()
    body = anthropic_body(
        stream=True, tools=TOOLS_ANTHROPIC, messages=[{"role": "user", "content": ASK}]
    )
    with (
        gateway.client() as client,
        client.stream(
            "POST",
            "/anthropic/v1/messages",
            json=body,
            headers={**ANTHROPIC_HEADERS, "x-api-key": token},
        ) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        raw = answer.read()
    events = [(e, json.loads(d)) for e, d in iter_sse(raw)]
    kinds = [e for e, _ in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    partial = "".join(
        d["delta"]["partial_json"] for e, d in events
        if e == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )  # fmt: skip
    assert "notes.txt" in json.loads(partial)["command"]

    (row,) = wait_for_request(session)
    start = events[0][1]["message"]["usage"]
    final = [d for e, d in events if e == "message_delta"][0]["usage"]
    assert row.stream is True and row.outcome == "ok"
    assert row.input_tokens == start["input_tokens"]
    assert row.output_tokens == final["output_tokens"]
    assert row.response_sha256 == hashlib.sha256(raw).hexdigest()
    assert row.response_bytes == len(raw)


def test_count_tokens_and_models_listing(gateway, fresh_upstream, mint):
    token, session = mint()
    headers = {**ANTHROPIC_HEADERS, "x-api-key": token}
    with gateway.client() as client:
        counted = client.post(
            "/anthropic/v1/messages/count_tokens",
            json={"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]},
            headers=headers,
        )
        anthropic_models = client.get("/anthropic/v1/models", headers=headers)
        openai_models = client.get(
            "/openai/v1/models", headers={"authorization": f"Bearer {token}"}
        )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert "claude-sonnet-4-5" in [m["id"] for m in anthropic_models.json()["data"]]
    assert openai_models.json()["object"] == "list"
    assert "gpt-5" in [m["id"] for m in openai_models.json()["data"]]
    rows = wait_for_request(session, 3)
    assert [r.endpoint for r in rows] == ["count_tokens", "models", "models"]
    assert rows[0].input_tokens == counted.json()["input_tokens"]


def test_openai_chat_completions_stream_and_not(gateway, fresh_upstream, mint):
    token, session = mint("opencode")
    body = {
        "model": "gpt-4.1",
        "messages": [{"role": "user", "content": ASK}],
        "tools": TOOLS_OPENAI,
    }
    with gateway.client(token) as client:
        whole = client.post("/openai/v1/chat/completions", json=body)
        streamed = client.post(
            "/openai/v1/chat/completions",
            json={**body, "stream": True, "stream_options": {"include_usage": True}},
        )
    assert whole.status_code == 200
    call = whole.json()["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "shell"
    assert fresh_upstream.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"

    chunks = [d for _, d in iter_sse(streamed.content)]
    assert chunks[-1] == "[DONE]"
    usage = json.loads(chunks[-2])["usage"]
    arguments = "".join(
        tc["function"].get("arguments", "")
        for c in chunks[:-1]
        for choice in json.loads(c)["choices"]
        for tc in choice["delta"].get("tool_calls", [])
    )
    assert "notes.txt" in json.loads(arguments)["command"]

    first, second = wait_for_request(session, 2)
    assert (first.endpoint, first.stream, second.stream) == ("chat.completions", False, True)
    assert first.input_tokens == whole.json()["usage"]["prompt_tokens"] > 0
    assert first.output_tokens == whole.json()["usage"]["completion_tokens"]
    assert second.input_tokens == usage["prompt_tokens"]
    assert second.output_tokens == usage["completion_tokens"]


def test_openai_responses_stream_and_not(gateway, fresh_upstream, mint):
    token, session = mint("codex")
    body = {
        "model": "gpt-5-codex",
        "input": [{"type": "message", "role": "user", "content": ASK}],
        "tools": [{"type": "function", "name": "shell", "parameters": SCHEMA}],
    }
    with gateway.client(token) as client:
        whole = client.post("/openai/v1/responses", json=body)
        streamed = client.post("/openai/v1/responses", json={**body, "stream": True})
    assert whole.status_code == 200
    assert whole.json()["output"][0]["type"] == "function_call"
    events = [(e, json.loads(d)) for e, d in iter_sse(streamed.content)]
    assert events[-1][0] == "response.completed"
    usage = events[-1][1]["response"]["usage"]

    first, second = wait_for_request(session, 2)
    assert first.endpoint == "responses" and first.runtime == "codex"
    assert first.input_tokens == whole.json()["usage"]["input_tokens"]
    assert (second.stream, second.input_tokens, second.output_tokens) == (
        True, usage["input_tokens"], usage["output_tokens"],
    )  # fmt: skip


def test_the_unix_socket_serves_the_same_gateway(gateway, fresh_upstream, mint):
    token, session = mint()
    assert gateway.socket_path.stat().st_mode & 0o777 == 0o666
    with gateway.socket_client(token) as client:
        answer = client.post(
            "/anthropic/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        health = client.get("/healthz")
    assert answer.status_code == 200 and answer.json()["type"] == "message"
    assert health.status_code == 200
    assert wait_for_request(session)[0].outcome == "ok"
