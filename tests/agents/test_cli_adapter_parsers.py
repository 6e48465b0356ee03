"""Each CLI adapter turns its CLI's documented JSON event stream into agent events."""

import json

from sessions.agents.claude_code import ClaudeCodeParser
from sessions.agents.codex import CodexParser
from sessions.agents.opencode import OpenCodeParser
from tests.agents import cli_streams


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
