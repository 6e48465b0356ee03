"""HTTP 429/500 and timeouts are retried with backoff, then reported; a permanent refusal (an
unknown model, a bad key) fails the turn in the API's own words (`done` says `failed`, so the
runner keeps whatever the turn changed)."""

import time

from tests.sessions.agents.conftest import (
    Reply,
    chat_message,
    chat_tool_calls,
    make_turn,
    of_kind,
    openai_agent,
    openai_error,
    run,
)


def test_rate_limits_and_server_errors_are_retried_with_backoff(fake_model, sandbox):
    fake_model.push(
        Reply(openai_error("Rate limit reached", type_="requests"), 429, {"retry-after": "0.3"}),
        Reply(openai_error("The server had an error", type_="server_error"), 500),
        chat_message("done"),
    )
    events = run(openai_agent(fake_model, retries=3, backoff_seconds=0.05), make_turn(sandbox))
    first, second, third = (r.at for r in fake_model.requests)
    assert second - first >= 0.3  # Retry-After is honoured
    assert third - second >= 0.1  # exponential: 0.05 * 2
    notes = [o["text"] for o in of_kind(events, "output")]
    assert notes[0].startswith(
        f"the model API at {fake_model.url}/v1 answered HTTP 429: Rate limit reached; retrying"
    )
    assert "(attempt 3 of 4)" in notes[1]
    assert events[-1].data["reason"] == "answered"
    assert not of_kind(events, "error")


def test_a_request_that_times_out_is_retried(fake_model, sandbox):
    fake_model.push(Reply(chat_message("slow"), delay=5), chat_message("quick"))
    started = time.monotonic()
    events = run(openai_agent(fake_model, request_timeout=1), make_turn(sandbox))
    assert time.monotonic() - started < 4
    assert "did not answer within 1 s; retrying" in of_kind(events, "output")[0]["text"]
    assert of_kind(events, "message") == [{"text": "quick"}]


def test_persistent_failures_before_any_change_fail_the_turn_with_the_reason(fake_model, sandbox):
    fake_model.push(*[Reply(openai_error("Bad gateway"), 502) for _ in range(3)])
    events = run(openai_agent(fake_model, retries=2), make_turn(sandbox))
    assert len(fake_model.requests) == 3
    assert events[-1].data["failed"] == (
        f"the model API at {fake_model.url}/v1 answered HTTP 502: Bad gateway "
        "(gave up after 3 attempts)"
    )


def test_persistent_failures_after_a_change_are_reported_and_the_work_is_kept(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("write_file", {"path": "kept.txt", "content": "kept\n"})),
        *[Reply(openai_error("overloaded"), 503) for _ in range(2)],
    )
    events = run(openai_agent(fake_model, retries=1), make_turn(sandbox))
    error = of_kind(events, "error")[-1]
    assert error["status"] == 503 and "answered HTTP 503: overloaded" in error["message"]
    assert events[-1].data["reason"] == "model_error"
    assert events[-1].data["failed"] == error["message"]
    assert sandbox.read_file("kept.txt") == b"kept\n"


def test_a_model_that_does_not_exist_is_reported_verbatim_without_retrying(fake_model, sandbox):
    verbatim = "The model `gpt-17` does not exist or you do not have access to it."
    fake_model.push(Reply(openai_error(verbatim, code="model_not_found"), 404))
    events = run(openai_agent(fake_model, model="gpt-17"), make_turn(sandbox))
    assert len(fake_model.requests) == 1
    message = f"the model API at {fake_model.url}/v1 answered HTTP 404: {verbatim}"
    assert events[-1].data["failed"] == message
    assert of_kind(events, "error")[-1]["message"] == message


def test_an_unreachable_endpoint_is_named(sandbox):
    from sessions.agents.builtin import BuiltinAgent
    from sessions.agents.llm import OpenAIChat

    client = OpenAIChat(base_url="http://127.0.0.1:9/v1", api_key="", model="m")
    events = run(BuiltinAgent(client, retries=1, backoff_seconds=0.01), make_turn(sandbox))
    failed = events[-1].data["failed"]
    assert failed.startswith("cannot reach the model API at http://127.0.0.1:9/v1: ")
    assert failed.endswith("(gave up after 2 attempts)")
