"""With an Anthropic key the built-in agent speaks the Messages API: tool_use blocks in,
tool_result blocks back, usage priced."""

from tests.sessions.agents.conftest import (
    MODEL_KEY,
    Reply,
    anthropic_agent,
    make_turn,
    messages_text,
    messages_tool_use,
    of_kind,
    run,
)


def test_a_turn_over_the_messages_api_edits_files_and_records_usage(fake_model, sandbox):
    fake_model.push(
        messages_tool_use(
            ("edit_file", {"path": "src/greet.py", "old_string": "Hi ", "new_string": "Hello, "}),
            ("run_command", {"command": "sh check.sh"}),
            text="I'll fix the greeting and check it.",
        ),
        messages_text("Fixed: greet says Hello now.", usage=(2000, 100)),
    )
    events = run(anthropic_agent(fake_model), make_turn(sandbox))

    assert sandbox.read_file("src/greet.py") == b"def greet(name):\n    return 'Hello, ' + name\n"
    first, second = fake_model.requests
    assert first.path == "/v1/messages"
    assert first.headers["x-api-key"] == MODEL_KEY
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in first.headers
    body = first.body
    assert body["model"] == "claude-sonnet-4-5-20250929" and body["max_tokens"] > 0
    assert "Run `sh check.sh` before finishing." in body["system"]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Request from Ada Engineer (engineer):\n\nmake greet say Hello",
                }
            ],
        }
    ]
    assert {t["name"] for t in body["tools"]} >= {"read_file", "edit_file", "finish"}
    assert all("input_schema" in t for t in body["tools"])
    # Both tool results go back in one user turn, as tool_result blocks.
    assistant, results = second.body["messages"][1:]
    uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results["content"]] == [u["id"] for u in uses]
    assert results["content"][1]["content"] == "the command exited with status 0\nok"
    assert results["content"][1]["is_error"] is False

    messages = of_kind(events, "message")
    assert messages == [
        {"text": "I'll fix the greeting and check it."},
        {"text": "Fixed: greet says Hello now."},
    ]
    usage = of_kind(events, "usage")
    assert usage[0]["provider"] == "anthropic"
    assert usage[0]["cost_usd"] == 0.0033  # 900 in x $3/M + 40 out x $15/M
    assert usage[1]["turn_input_tokens"] == 2900


def test_an_anthropic_error_fails_the_turn_verbatim(fake_model, sandbox):
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}}
    fake_model.push(Reply(body, 404))
    events = run(anthropic_agent(fake_model), make_turn(sandbox))
    message = f"the model API at {fake_model.url} answered HTTP 404: model: claude-x"
    assert events[-1].data["failed"] == message
    assert of_kind(events, "error") == [{"message": message, "status": 404}]


def test_overloaded_529_is_retried(fake_model, sandbox):
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake_model.push(Reply(overloaded, 529), messages_text("ok"))
    events = run(anthropic_agent(fake_model), make_turn(sandbox))
    assert "answered HTTP 529: Overloaded; retrying" in of_kind(events, "output")[0]["text"]
    assert of_kind(events, "message") == [{"text": "ok"}]
