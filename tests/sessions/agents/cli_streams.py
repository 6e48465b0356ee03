"""Recorded-shape event streams of the three agent CLIs, one JSON object per line, exactly as
each CLI's documentation and source describe them. Ids, paths and numbers are made up; the
field names, nesting and types are not."""

import json

# Claude Code, `claude -p --output-format stream-json --verbose`: SDKMessage objects.
# Source: https://docs.claude.com/en/docs/agent-sdk/typescript (SDKSystemMessage "init",
# SDKAssistantMessage, SDKUserMessage with tool_result blocks, SDKResultMessage with
# total_cost_usd/usage/num_turns) and https://docs.claude.com/en/docs/claude-code/headless.
_session = "3f2a9c1e-5b7d-4e0a-9c61-2d8f0e7b4a10"
_msg = {
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "stop_reason": None,
    "stop_sequence": None,
    "usage": {
        "input_tokens": 4,
        "cache_creation_input_tokens": 1200,
        "cache_read_input_tokens": 0,
        "output_tokens": 3,
        "service_tier": "standard",
    },
}


def _assistant(n, *content):
    message = {"id": f"msg_01{n}", **_msg, "content": list(content)}
    return {"type": "assistant", "message": message, "parent_tool_use_id": None,
            "session_id": _session, "uuid": f"a-{n}"}  # fmt: skip


def _tool_result(tool_use_id, content, is_error=False):
    block = {"tool_use_id": tool_use_id, "type": "tool_result", "content": content}
    if is_error:
        block["is_error"] = True
    message = {"role": "user", "content": [block]}
    return {"type": "user", "message": message, "parent_tool_use_id": None,
            "session_id": _session, "uuid": f"u-{tool_use_id}"}  # fmt: skip


CLAUDE_CODE = [
    {"type": "system", "subtype": "init", "cwd": "/workspace", "session_id": _session,
     "tools": ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "MultiEdit", "Write", "TodoWrite"],
     "mcp_servers": [], "model": "claude-sonnet-4-5-20250929",
     "permissionMode": "bypassPermissions", "slash_commands": ["compact", "review"],
     "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.0.14",
     "output_style": "default", "agents": [], "uuid": "s-1"},
    _assistant("A", {"type": "thinking", "thinking": "The greeting lives in src/greet.py.",
                     "signature": "EqQBCkYIBxgCKkA"}),
    _assistant("B", {"type": "text", "text": "I'll look at greet.py first."}),
    _assistant("C", {"type": "tool_use", "id": "toolu_01Read", "name": "Read",
                     "input": {"file_path": "/workspace/src/greet.py"}}),
    _tool_result("toolu_01Read", "     1\tdef greet(name):\n     2\t    return 'Hi ' + name\n"),
    _assistant("D", {"type": "tool_use", "id": "toolu_01Edit", "name": "Edit",
                     "input": {"file_path": "/workspace/src/greet.py", "old_string": "'Hi '",
                               "new_string": "'Hello, '"}}),
    _tool_result("toolu_01Edit", [{"type": "text", "text": "The file has been updated."}]),
    _assistant("E", {"type": "tool_use", "id": "toolu_01Bash", "name": "Bash",
                     "input": {"command": "sh check.sh", "description": "Run the check"}}),
    _tool_result("toolu_01Bash", "sh: check.sh: not found", is_error=True),
    _assistant("F", {"type": "text", "text": "Done: greet now says Hello."}),
    {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 14523,
     "duration_api_ms": 12011, "num_turns": 4, "result": "Done: greet now says Hello.",
     "session_id": _session, "total_cost_usd": 0.0123,
     "usage": {"input_tokens": 12, "cache_creation_input_tokens": 1200,
               "cache_read_input_tokens": 3600, "output_tokens": 210,
               "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"},
     "modelUsage": {"claude-sonnet-4-5-20250929": {
         "inputTokens": 12, "outputTokens": 210, "cacheReadInputTokens": 3600,
         "cacheCreationInputTokens": 1200, "webSearchRequests": 0, "costUSD": 0.0123,
         "contextWindow": 200000}},
     "permission_denials": [], "uuid": "r-1"},
]  # fmt: skip

CLAUDE_CODE_MAX_TURNS = {
    "type": "result", "subtype": "error_max_turns", "is_error": True, "duration_ms": 9000,
    "duration_api_ms": 8000, "num_turns": 3, "session_id": _session, "total_cost_usd": 0.02,
    "usage": {"input_tokens": 30, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 0, "output_tokens": 90},
    "modelUsage": {}, "permission_denials": [], "errors": [], "uuid": "r-2",
}  # fmt: skip

_GREP_OUTPUT = "src/greet.py:2:    return 'Hi ' + name\n"

# Codex, `codex exec --json`: ThreadEvent JSON Lines.
# Source: openai/codex docs/exec.md ("JSON output mode", its sample output) and
# codex-rs/exec/src/exec_events.rs (ThreadEvent, ThreadItem and its item types).
CODEX = [
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning",
                                        "text": "**Searching for the greeting**"}},
    {"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                                      "command": "bash -lc 'grep -rn Hi src'",
                                      "aggregated_output": "", "exit_code": None,
                                      "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                        "command": "bash -lc 'grep -rn Hi src'",
                                        "aggregated_output": _GREP_OUTPUT,
                                        "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "file_change",
                                        "changes": [{"path": "/workspace/src/greet.py",
                                                     "kind": "update"},
                                                    {"path": "/workspace/CHANGES.md",
                                                     "kind": "add"}],
                                        "status": "completed"}},
    {"type": "item.started", "item": {"id": "item_3", "type": "mcp_tool_call", "server": "docs",
                                      "tool": "lookup", "arguments": {"q": "greet"},
                                      "result": None, "error": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "mcp_tool_call", "server": "docs",
                                        "tool": "lookup", "arguments": {"q": "greet"},
                                        "result": {"content": [{"type": "text",
                                                                "text": "greet(name) -> str"}],
                                                   "structured_content": None},
                                        "error": None, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "command_execution",
                                        "command": "bash -lc 'sh check.sh'",
                                        "aggregated_output": "grep: nope\n", "exit_code": 1,
                                        "status": "failed"}},
    {"type": "item.completed", "item": {"id": "item_5", "type": "agent_message",
                                        "text": "greet now says Hello."}},
    {"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448,
                                         "output_tokens": 122}},
]  # fmt: skip

CODEX_FAILED = [
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a54"},
    {"type": "turn.started"},
    {"type": "error", "message": "stream disconnected before completion"},
    {"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}},
]

# OpenCode, `opencode run --format json`: {type, timestamp, sessionID, part | error}.
# Source: anomalyco/opencode packages/opencode/src/cli/cmd/run.ts (`emit` of tool_use,
# step_start, step_finish, text, reasoning, error) and the SDK's types.gen.ts (ToolPart,
# ToolStateCompleted/ToolStateError, StepFinishPart tokens/cost); the step_start/text lines
# follow the sample output in anomalyco/opencode issue #26855.
_ses, _m = "ses_1ea551140ffedVQFo35xGxPtJ8", "msg_e15aaef93001ze1a2JzDi9w19F"


def _part(n, kind, **fields):
    return {"id": f"prt_e15ab07df00{n}", "sessionID": _ses, "messageID": _m, "type": kind, **fields}


OPENCODE = [
    {"type": "step_start", "timestamp": 1778479990756, "sessionID": _ses,
     "part": _part(1, "step-start", snapshot="4b825dc642cb6eb9a060e54bf8d69288fbee4904")},
    {"type": "reasoning", "timestamp": 1778479990800, "sessionID": _ses,
     "part": _part(2, "reasoning", text="Find the greeting.",
                   time={"start": 1778479990757, "end": 1778479990790})},
    {"type": "tool_use", "timestamp": 1778479991200, "sessionID": _ses,
     "part": _part(3, "tool", callID="call_7Hk2", tool="edit",
                   state={"status": "completed",
                          "input": {"filePath": "/workspace/src/greet.py", "oldString": "'Hi '",
                                    "newString": "'Hello, '"},
                          "output": "", "title": "src/greet.py",
                          "metadata": {"diff": "@@ -2 +2 @@"},
                          "time": {"start": 1778479991000, "end": 1778479991190}})},
    {"type": "tool_use", "timestamp": 1778479992000, "sessionID": _ses,
     "part": _part(4, "tool", callID="call_8Lm3", tool="bash",
                   state={"status": "error", "input": {"command": "sh check.sh"},
                          "error": "Command failed with exit code 1",
                          "time": {"start": 1778479991500, "end": 1778479991990}})},
    {"type": "text", "timestamp": 1778479990912, "sessionID": _ses,
     "part": _part(5, "text", text="greet now says Hello.",
                   time={"start": 1778479990757, "end": 1778479990907})},
    {"type": "step_finish", "timestamp": 1778479993000, "sessionID": _ses,
     "part": _part(6, "step-finish", reason="stop",
                   snapshot="4b825dc642cb6eb9a060e54bf8d69288fbee4904", cost=0.0042,
                   tokens={"input": 209, "output": 120, "reasoning": 30,
                           "cache": {"write": 0, "read": 18944}})},
    {"type": "error", "timestamp": 1778479994000, "sessionID": _ses,
     "error": {"name": "APIError", "data": {"message": "Invalid API key", "statusCode": 401,
                                           "isRetryable": False}}},
]  # fmt: skip


def jsonl(objects) -> str:
    return "".join(json.dumps(obj) + "\n" for obj in objects)
