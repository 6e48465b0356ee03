"""The Anthropic Messages API: a request's conversation, errors and replies (JSON or SSE)."""

from __future__ import annotations

import json
from typing import Any

from .conversation import Conversation, Decision, Tool, command_of, estimate_tokens, new_id, text_of
from .wire import Reply, halves, sse


def anthropic_conversation(body: dict[str, Any]) -> Conversation:
    tools = [
        Tool(t["name"], "function", t.get("input_schema") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict) and "name" in t
    ]
    calls: list[str] = []
    last, user_text, result, error = "none", "", "", False
    for msg in body.get("messages") or []:
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if msg.get("role") == "assistant":
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    calls.append(command_of(b.get("input")))
            last = "assistant"
        elif msg.get("role") == "user":
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                last = "tool_result"
                result = text_of(results[-1].get("content"))
                error = bool(results[-1].get("is_error"))
            else:
                last, user_text = "user", text_of(content)
    return Conversation(tools, last, user_text, calls, result, error)


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def anthropic_reply(model: str, d: Decision, input_tokens: int, stream: bool) -> Reply:
    content: list[dict[str, Any]] = []
    if d.text is not None:
        content.append({"type": "text", "text": d.text})
    if d.tool is not None:
        content.append(
            {"type": "tool_use", "id": new_id("toolu_"), "name": d.tool.name, "input": d.arguments}
        )
    output_tokens = estimate_tokens(len(json.dumps(content)))
    stop = "tool_use" if d.tool else "end_turn"
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }
    message = {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return Reply(200, message)
    start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events = [sse("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(content):
        if block["type"] == "text":
            empty = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in halves(block["text"])]
        else:
            empty = dict(block, input={})
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in halves(raw)]
        events.append(
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": empty},
            )
        )
        if i == 0:
            events.append(sse("ping", {"type": "ping"}))
        for delta in deltas:
            events.append(
                sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                )
            )
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    events.append(sse("message_stop", {"type": "message_stop"}))
    return Reply(200, events=events)
