"""Each CLI adapter turns its CLI's documented JSON event stream into agent events."""

import json

import pytest

from sessions.agents.claude_code import ClaudeCodeParser
from sessions.agents.codex import CodexParser
from sessions.agents.opencode import OpenCodeParser
from tests.sessions.agents import cli_streams


def parse(parser, objects):
    events = []
    for obj in objects:
        events.extend(parser.feed(json.dumps(obj)))
    return [(e.kind, e.data) for e in events]


def test_claude_code_stream_json_becomes_messages_tool_calls_edits_and_usage():
    events = parse(ClaudeCodeParser(), cli_streams.CLAUDE_CODE)
    assert events == [
        ("output", {"stream": "agent",
                    "text": "Claude Code started (model claude-sonnet-4-5-20250929)"}),
        ("reasoning", {"text": "The greeting lives in src/greet.py."}),
        ("message", {"text": "I'll look at greet.py first."}),
        ("tool_call", {"id": "toolu_01Read", "name": "Read",
                       "arguments": {"file_path": "/workspace/src/greet.py"}}),
        ("tool_result", {"id": "toolu_01Read", "ok": True,
                         "output": "     1\tdef greet(name):\n     2\t    return 'Hi ' + name\n"}),
        ("tool_call", {"id": "toolu_01Edit", "name": "Edit",
                       "arguments": {"file_path": "/workspace/src/greet.py",
                                     "old_string": "'Hi '", "new_string": "'Hello, '"}}),
        ("file_edit", {"path": "src/greet.py", "action": "edit"}),
        ("tool_result", {"id": "toolu_01Edit", "ok": True, "output": "The file has been updated."}),
        ("tool_call", {"id": "toolu_01Bash", "name": "Bash",
                       "arguments": {"command": "sh check.sh", "description": "Run the check"}}),
        ("tool_result", {"id": "toolu_01Bash", "ok": False, "output": "sh: check.sh: not found"}),
        ("message", {"text": "Done: greet now says Hello."}),
        ("usage", {"provider": "anthropic", "model": "claude-sonnet-4-5-20250929",
                   "input_tokens": 4812, "output_tokens": 210, "cost_usd": 0.0123, "steps": 4,
                   "duration_ms": 14523}),
    ]  # fmt: skip


def test_a_claude_code_error_result_is_an_error_event():
    parser = ClaudeCodeParser(model="claude-sonnet-4-5")
    events = parse(parser, [cli_streams.CLAUDE_CODE_MAX_TURNS])
    assert [k for k, _ in events] == ["usage", "error"]
    assert events[1][1] == {"message": "Claude Code ended with error_max_turns"}
    assert events[0][1]["cost_usd"] == 0.02 and parser.error_reported


# Claude Code 2.1.197's own lines (from real runs against the stand-in, trimmed to the fields
# the adapter reads): a retried request, a model the API refused, a session --resume lacks.
_CC_SESSION = "84b36481-eae4-42b3-8922-30c3209e158d"
_CC_ZERO_USAGE = {"input_tokens": 0, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 0}  # fmt: skip
CLAUDE_CODE_REFUSED = [
    {"type": "system", "subtype": "init", "cwd": "/workspace", "session_id": _CC_SESSION,
     "model": "no-such-model", "permissionMode": "bypassPermissions",
     "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.197"},
    {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 3,
     "retry_delay_ms": 504.5, "error_status": 502, "error": "server_error",
     "session_id": _CC_SESSION},
    {"type": "assistant", "message": {
        "id": "605b6ac6", "model": "<synthetic>", "role": "assistant", "type": "message",
        "stop_reason": "stop_sequence", "usage": _CC_ZERO_USAGE,
        "content": [{"type": "text", "text": "There's an issue with the selected model "
                     "(no-such-model). It may not exist or you may not have access to it. "
                     "Run --model to pick a different model."}]},
     "parent_tool_use_id": None, "session_id": _CC_SESSION, "error": "model_not_found"},
    {"type": "result", "subtype": "success", "is_error": True, "api_error_status": 404,
     "duration_ms": 119, "num_turns": 1, "session_id": _CC_SESSION, "total_cost_usd": 0,
     "result": "There's an issue with the selected model (no-such-model). It may not exist or "
               "you may not have access to it. Run --model to pick a different model.",
     "usage": _CC_ZERO_USAGE, "modelUsage": {}},
]  # fmt: skip
CLAUDE_CODE_NO_CONVERSATION = {
    "type": "result", "subtype": "error_during_execution", "duration_ms": 0, "is_error": True,
    "num_turns": 0, "session_id": "5fb4c1c6-6a8b-4c1a-9a0b-1f2e3d4c5b6a", "total_cost_usd": 0,
    "usage": _CC_ZERO_USAGE, "modelUsage": {},
    "errors": ["No conversation found with session ID: 5fb4c1c6-6a8b-4c1a-9a0b-1f2e3d4c5b6a"],
}  # fmt: skip


def test_claude_code_refused_by_the_api_fails_with_its_words_and_the_apis_status():
    """Canned 2.1.197 lines: the retry is a notice, Claude Code's text for the refusal is the
    failure (not a reply), and usage names the model asked for, not "<synthetic>"."""
    parser = ClaudeCodeParser(model="no-such-model")
    events = parse(parser, CLAUDE_CODE_REFUSED)
    failure = (
        "Claude Code: There's an issue with the selected model (no-such-model). It may not "
        "exist or you may not have access to it. Run --model to pick a different model. "
        "(API error 404 model_not_found)"
    )
    assert [k for k, _ in events] == ["output", "notice", "usage", "error"]
    assert events[1][1] == {
        "message": "Claude Code retries the model API request (attempt 1 of 3): 502 server_error"
    }
    assert events[2][1]["model"] == "no-such-model"
    assert events[3][1] == {"message": failure}
    assert parser.failure == failure and parser.resume_id == _CC_SESSION


NOT_A_SESSION_ID = (
    "Error: --resume requires a valid session ID or session title when used with --print. "
    'Usage: claude -p --resume <session-id|title>. Provided value "ses_4f2a9c1e" is not a UUID '
    "and does not match any session title."
)


@pytest.mark.parametrize(
    "said",
    [
        "No conversation found with session ID: 5fb4c1c6-6a8b-4c1a-9a0b-1f2e3d4c5b6a",
        NOT_A_SESSION_ID,
    ],
)
def test_claude_code_resuming_a_session_it_lacks_is_no_failure_of_the_parser(said):
    """Canned 2.1.197 lines: the adapter starts a new conversation instead (tested for real in
    tests/sessions/agents/test_claude_code_real.py)."""
    parser = ClaudeCodeParser(model="claude-sonnet-4-5")
    assert parse(parser, [{**CLAUDE_CODE_NO_CONVERSATION, "errors": [said]}]) == []
    assert parser.lost_conversation == said
    assert not parser.failure and not parser.resume_id


def test_codex_exec_json_becomes_reasoning_commands_file_changes_and_usage():
    events = parse(CodexParser(model="gpt-5-codex"), cli_streams.CODEX)
    assert events == [
        ("reasoning", {"text": "**Searching for the greeting**"}),
        ("tool_call", {"id": "item_1", "name": "shell",
                       "arguments": {"command": "bash -lc 'grep -rn Hi src'"}}),
        ("tool_result", {"id": "item_1", "name": "shell", "ok": True, "exit_code": 0,
                         "output": "src/greet.py:2:    return 'Hi ' + name\n"}),
        ("file_edit", {"path": "src/greet.py", "action": "update", "status": "completed"}),
        ("file_edit", {"path": "CHANGES.md", "action": "add", "status": "completed"}),
        ("tool_call", {"id": "item_3", "name": "docs.lookup", "arguments": {"q": "greet"}}),
        ("tool_result", {"id": "item_3", "name": "docs.lookup", "ok": True,
                         "output": "greet(name) -> str"}),
        # Seen only at completion: the call is reported with its result.
        ("tool_call", {"id": "item_4", "name": "shell",
                       "arguments": {"command": "bash -lc 'sh check.sh'"}}),
        ("tool_result", {"id": "item_4", "name": "shell", "ok": False, "exit_code": 1,
                         "output": "grep: nope\n"}),
        ("message", {"text": "greet now says Hello."}),
        ("usage", {"provider": "openai", "model": "gpt-5-codex", "input_tokens": 24763,
                   "cached_input_tokens": 24448, "output_tokens": 122,
                   "cost_usd": 0.032174}),
    ]  # fmt: skip


def test_a_failed_codex_turn_is_reported_in_codex_words():
    parser = CodexParser()
    events = parse(parser, cli_streams.CODEX_FAILED)
    assert events == [
        ("error", {"message": "Codex: stream disconnected before completion"}),
        ("error", {"message": "Codex: unexpected status 401 Unauthorized"}),
    ]
    assert parser.error_reported


def test_opencode_run_json_becomes_tool_calls_edits_messages_and_usage():
    parser = OpenCodeParser()
    events = parse(parser, cli_streams.OPENCODE)
    assert parser.resume_id == "ses_1ea551140ffedVQFo35xGxPtJ8"  # continued with --session
    assert parser.failure == "OpenCode: Invalid API key (HTTP 401)"
    assert events == [
        ("reasoning", {"text": "Find the greeting."}),
        ("tool_call", {"id": "call_7Hk2", "name": "edit",
                       "arguments": {"filePath": "/workspace/src/greet.py",
                                     "oldString": "'Hi '", "newString": "'Hello, '"}}),
        ("file_edit", {"path": "src/greet.py", "action": "edit"}),
        ("tool_result", {"id": "call_7Hk2", "name": "edit", "ok": True, "output": "",
                         "title": "src/greet.py"}),
        ("tool_call", {"id": "call_8Lm3", "name": "bash", "arguments": {"command": "sh check.sh"}}),
        ("tool_result", {"id": "call_8Lm3", "name": "bash", "ok": False,
                         "output": "Command failed with exit code 1", "title": None}),
        ("message", {"text": "greet now says Hello."}),
        ("usage", {"provider": "opencode", "model": None, "input_tokens": 19153,
                   "output_tokens": 150, "cost_usd": 0.0042, "reason": "stop"}),
        ("error", {"message": "OpenCode: Invalid API key (HTTP 401)"}),
    ]  # fmt: skip


def test_opencode_cost_of_a_model_it_has_no_price_for_is_unknown_not_free():
    """Canned parser edge case: OpenCode reports cost 0 for a model without a price."""
    finish = {
        "type": "step_finish",
        "sessionID": "ses_1",
        "part": {
            "type": "step-finish",
            "reason": "length",
            "cost": 0,
            "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}},
        },
    }
    assert parse(OpenCodeParser(model="qwen3-coder", priced=False), [finish]) == [
        (
            "usage",
            {
                "provider": "opencode",
                "model": "qwen3-coder",
                "input_tokens": 10,
                "output_tokens": 5,
                "cost_usd": None,
                "reason": "length",
            },
        ),
        ("notice", {"message": "OpenCode: the model stopped at its output limit"}),
    ]
    assert parse(OpenCodeParser(model="gpt-4.1"), [finish])[0][1]["cost_usd"] == 0


def test_lines_that_are_not_json_objects_are_kept_as_output():
    parser = CodexParser()
    assert [(e.kind, e.data) for e in parser.feed("Reading prompt from stdin...")] == [
        ("output", {"stream": "stdout", "text": "Reading prompt from stdin..."})
    ]
    assert parser.feed("[1, 2]")[0].kind == "output"
    assert parser.feed("   ") == []


def test_codex_warnings_are_notices_and_a_resumed_threads_usage_is_the_turns_own():
    """Canned-script parser edge case (lines as codex-cli 0.171.0 printed them): warnings and
    retries are notices, the failure is said once, turn.completed's thread totals become the
    turn's own usage, and endless "waiting for network" retries abandon the turn."""
    from sessions.agents.codex import Usage

    parser = CodexParser(model="gpt-5-codex", earlier=Usage(20346, 0, 104))
    metadata = "Model metadata for `gpt-5-codex` not found. Defaulting to fallback metadata."
    events = parse(parser, [
        {"type": "thread.started", "thread_id": "01a24158-94b4-7d62-b586-158ab08ddb5c"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": metadata}},
        {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"},
        {"type": "turn.completed", "usage": {"input_tokens": 41080, "cached_input_tokens": 0,
                                             "output_tokens": 205}},
    ])  # fmt: skip
    assert parser.resume_id == "01a24158-94b4-7d62-b586-158ab08ddb5c"
    retry = "Reconnecting... 1/5 (stream disconnected before completion)"
    assert events[:2] == [
        ("notice", {"message": f"Codex: {metadata}"}),
        ("notice", {"message": f"Codex: {retry}"}),
    ]
    usage = events[2][1]
    assert (usage["input_tokens"], usage["output_tokens"]) == (20734, 101)
    assert not parser.failure

    refused = CodexParser()
    said = "The model `gpt-9-nope` does not exist or you do not have access to it."
    events = parse(refused, [
        {"type": "error", "message": said}, {"type": "turn.failed", "error": {"message": said}},
    ])  # fmt: skip
    assert events == [("error", {"message": f"Codex: {said}"})]

    offline = CodexParser(base_url="https://api.example/v1")
    wait = "Reconnecting... waiting for network (Connection failed: error sending request)"
    events = parse(offline, [{"type": "error", "message": wait}] * 3)
    assert [k for k, _ in events] == ["notice", "notice", "notice", "error"]
    assert offline.abandon and offline.failure.startswith(
        "Codex cannot reach the model API at https://api.example/v1 (Connection failed"
    )
