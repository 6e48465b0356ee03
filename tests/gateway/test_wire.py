"""Usage as each provider reports it, read from a response as it passes (cached tokens included),
whatever the chunk boundaries."""

from __future__ import annotations

import json

import pytest

from gateway.wire import BadRequest, UsageMeter, parse_request


def sse(event: str | None, data: dict | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


ANTHROPIC_STREAM = b"".join([
    sse("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 300,
                  "cache_read_input_tokens": 2000, "output_tokens": 1}}}),
    sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                "delta": {"type": "text_delta", "text": "usage is not here"}}),
    sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                          "usage": {"output_tokens": 87}}),
    sse("message_stop", {"type": "message_stop"}),
])  # fmt: skip
CHAT_STREAM = b"".join([
    sse(None, {"id": "c", "object": "chat.completion.chunk",
               "choices": [{"delta": {"content": "hi"}}]}),
    sse(None, {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {
        "prompt_tokens": 1500, "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 1024}}}),
    sse(None, "[DONE]"),
])  # fmt: skip
RESPONSES_STREAM = b"".join([
    sse("response.created", {"type": "response.created", "response": {"usage": None}}),
    sse("response.completed", {"type": "response.completed", "response": {"usage": {
        "input_tokens": 900, "input_tokens_details": {"cached_tokens": 512},
        "output_tokens": 33, "output_tokens_details": {"reasoning_tokens": 20}}}}),
])  # fmt: skip


@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
@pytest.mark.parametrize(
    ("provider", "endpoint", "raw", "expected"),
    [
        ("anthropic", "messages", ANTHROPIC_STREAM, (2312, 87, 2000)),
        ("openai", "chat.completions", CHAT_STREAM, (1500, 40, 1024)),
        ("openai", "responses", RESPONSES_STREAM, (900, 33, 512)),
    ],
)
def test_streamed_usage_whatever_the_chunks(provider, endpoint, raw, expected, size):
    meter = UsageMeter(provider, endpoint, stream=True)
    for start in range(0, len(raw), size):
        meter.feed(raw[start : start + size])
    usage = meter.finish()
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == expected


def test_usage_of_whole_responses():
    anthropic = UsageMeter("anthropic", "messages", stream=False)
    usage = {"input_tokens": 5, "cache_read_input_tokens": 95, "output_tokens": 9}
    anthropic.feed(json.dumps({"type": "message", "usage": usage}).encode())
    assert vars(anthropic.finish()) == {
        "input_tokens": 100,
        "output_tokens": 9,
        "cached_tokens": 95,
    }
    counted = UsageMeter("anthropic", "count_tokens", stream=False)
    counted.feed(b'{"input_tokens": 42}')
    assert counted.finish().input_tokens == 42
    broken = UsageMeter("openai", "chat.completions", stream=False)
    broken.feed(b"<html>gateway timeout</html>")
    assert vars(broken.finish()) == {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}


@pytest.mark.parametrize(
    ("endpoint", "body", "field"),
    [
        ("messages", b"[]", "body"),
        ("messages", b'{"model": "", "max_tokens": 1, "messages": []}', "model"),
        ("messages", b'{"model": "m", "max_tokens": true, "messages": []}', "max_tokens"),
        ("count_tokens", b'{"model": "m"}', "messages"),
        ("responses", b'{"model": "m", "input": 5}', "input"),
    ],
)
def test_bad_requests_name_their_field(endpoint, body, field):
    with pytest.raises(BadRequest) as refused:
        parse_request(endpoint, body)
    assert refused.value.field == field and str(refused.value).startswith(f"{field}: ")


def test_a_good_request_gives_its_model_and_stream_flag():
    info = parse_request("responses", b'{"model": "gpt-5-codex", "input": "hi", "stream": true}')
    assert (info.model, info.stream) == ("gpt-5-codex", True)
