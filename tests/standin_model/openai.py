"""OpenAI's Chat Completions and Responses APIs: a request's conversation, errors and replies
(JSON or SSE)."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from .conversation import (
    Conversation,
    Decision,
    Tool,
    command_of,
    estimate_tokens,
    new_id,
    text_of,
)
from .wire import Reply, halves, sse


def chat_conversation(body: dict[str, Any]) -> Conversation:
    tools = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and "name" in fn:
            tools.append(Tool(fn["name"], "function", fn.get("parameters") or {}))
    calls: list[str] = []
    last, user_text, result = "none", "", ""
    for msg in body.get("messages") or []:
        role = msg.get("role")
        if role == "assistant":
            for call in msg.get("tool_calls") or []:
                calls.append(command_of((call.get("function") or {}).get("arguments")))
            last = "assistant"
        elif role == "tool":
            last, result = "tool_result", text_of(msg.get("content"))
        elif role == "user":
            last, user_text = "user", text_of(msg.get("content"))
    return Conversation(tools, last, user_text, calls, result)


def responses_tools(body: dict[str, Any]) -> list[Tool]:
    tools = []
    specs = list(body.get("tools") or [])
    # Codex may offer tools in an input item of their own rather than in ``tools``.
    for item in input_items(body):
        if item.get("type") == "additional_tools":
            specs += item.get("tools") or []
    while specs:
        t = specs.pop(0)
        if not isinstance(t, dict):
            continue
        kind = t.get("type", "function")
        if kind == "namespace":  # a group of tools (Codex: "functions", "multi_agent_v1")
            specs += t.get("tools") or []
        elif kind == "function" and "name" in t:
            tools.append(Tool(t["name"], "function", t.get("parameters") or {}))
        elif kind == "custom" and "name" in t:
            tools.append(Tool(t["name"], "custom", description=str(t.get("description") or "")))
        elif kind == "local_shell":
            tools.append(Tool("local_shell", "local_shell"))
    return tools


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    if isinstance(items, str):
        return [{"type": "message", "role": "user", "content": items}]
    return [i for i in items or [] if isinstance(i, dict)]


def responses_conversation(body: dict[str, Any], history: list[dict[str, Any]]) -> Conversation:
    calls: list[str] = []
    last, user_text, result = "none", "", ""
    for item in [*history, *input_items(body)]:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role == "user":
                last, user_text = "user", text_of(item.get("content"))
            elif role == "assistant":
                last = "assistant"
        elif kind == "function_call":
            calls.append(command_of(item.get("arguments")))
            last = "assistant"
        elif kind == "custom_tool_call":
            calls.append(command_of(str(item.get("input") or "")))
            last = "assistant"
        elif kind == "local_shell_call":
            calls.append(command_of((item.get("action") or {}).get("command")))
            last = "assistant"
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            last, result = "tool_result", text_of(item.get("output"), ("input_text", "text"))
    return Conversation(responses_tools(body), last, user_text, calls, result)


def openai_error(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def chat_reply(model: str, d: Decision, body: dict[str, Any], input_tokens: int) -> Reply:
    cid, created = new_id("chatcmpl-"), int(time.time())
    calls = []
    if d.tool is not None:
        calls.append(
            {
                "id": new_id("call_"),
                "type": "function",
                "function": {"name": d.tool.name, "arguments": json.dumps(d.arguments)},
            }
        )
    output_tokens = estimate_tokens(len(json.dumps(calls)) + len(d.text or ""))
    usage = {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    finish = "tool_calls" if calls else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": d.text,
            "refusal": None,
            "annotations": [],
        }
        if calls:
            message["tool_calls"] = calls
        return Reply(
            200,
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                ],
                "usage": usage,
                "system_fingerprint": None,
            },
        )

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return sse(
            None,
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "logprobs": None,
                        "finish_reason": finish_reason,
                    }
                ],
            },
        )

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for part in halves(d.text or "") if d.text else []:
        events.append(chunk({"content": part}))
    for i, call in enumerate(calls):
        head = {"index": i, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        events.append(chunk({"tool_calls": [head]}))
        for part in halves(call["function"]["arguments"]):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
    events.append(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(
            sse(
                None,
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "system_fingerprint": None,
                    "choices": [],
                    "usage": usage,
                },
            )
        )
    events.append(sse(None, "[DONE]"))
    return Reply(200, events=events)


def responses_reply(
    model: str, d: Decision, body: dict[str, Any], input_tokens: int
) -> tuple[Reply, str, list[dict[str, Any]]]:
    rid = new_id("resp_")
    items: list[dict[str, Any]] = []
    if d.text is not None:
        items.append(
            {
                "id": new_id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": d.text, "annotations": [], "logprobs": []}
                ],
            }
        )
    if d.tool is not None and d.tool.kind == "custom":
        items.append(
            {
                "id": new_id("ctc_"),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": new_id("call_"),
                "name": d.tool.name,
                "input": d.arguments,
            }
        )
    elif d.tool is not None and d.tool.kind == "local_shell":
        items.append(
            {
                "id": new_id("lsh_"),
                "type": "local_shell_call",
                "status": "completed",
                "call_id": new_id("call_"),
                "action": {
                    "type": "exec",
                    "command": d.arguments,
                    "env": {},
                    "timeout_ms": None,
                    "user": None,
                    "working_directory": None,
                },
            }
        )
    elif d.tool is not None:
        items.append(
            {
                "id": new_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "arguments": json.dumps(d.arguments),
                "call_id": new_id("call_"),
                "name": d.tool.name,
            }
        )
    output_tokens = estimate_tokens(len(json.dumps(items)))
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }
    response: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": items,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }
    if not body.get("stream"):
        return Reply(200, response), rid, items
    seq = itertools.count(0)
    events: list[bytes] = []

    def emit(type_: str, **fields: Any) -> None:
        events.append(sse(type_, {"type": type_, "sequence_number": next(seq), **fields}))

    pending = dict(response, status="in_progress", output=[], usage=None)
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(items):
        iid = item["id"]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", content=[]),
            )
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit(
                "response.content_part.added",
                item_id=iid,
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in halves(text):
                emit(
                    "response.output_text.delta",
                    item_id=iid,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=iid,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=iid,
                output_index=index,
                content_index=0,
                part=dict(part, text=text),
            )
        elif item["type"] == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", arguments=""),
            )
            for piece in halves(item["arguments"]):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=iid,
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=iid,
                output_index=index,
                arguments=item["arguments"],
            )
        elif item["type"] == "custom_tool_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", input=""),
            )
            for piece in halves(item["input"]):
                emit(
                    "response.custom_tool_call_input.delta",
                    item_id=iid,
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.custom_tool_call_input.done",
                item_id=iid,
                output_index=index,
                input=item["input"],
            )
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return Reply(200, events=events), rid, items
