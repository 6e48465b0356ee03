"""Claude Code (`@anthropic-ai/claude-code`), run as `claude -p --output-format stream-json`.

The stream is one JSON object per line (the Agent SDK's SDKMessage types,
https://docs.claude.com/en/docs/agent-sdk/typescript#message-types and
https://docs.claude.com/en/docs/claude-code/headless):

* ``{"type": "system", "subtype": "init", "session_id", "model", "tools", "cwd", ...}``
* ``{"type": "assistant", "message": {Anthropic Messages API message: content blocks of type
  text / thinking / tool_use}, "parent_tool_use_id", "session_id"}``
* ``{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
  "tool_use_id", "content", "is_error"}]}, ...}``
* ``{"type": "result", "subtype": "success" | "error_max_turns" | "error_during_execution" | ...,
  "is_error", "result", "num_turns", "duration_ms", "total_cost_usd", "usage": {...}}``
"""

from __future__ import annotations

from typing import Any

from sessions.agents.base import AgentError, AgentEvent, Turn
from sessions.agents.cli_process import CliAgent, StreamParser, text_of, workspace_path
from snapshots.sandbox import SandboxError

EDIT_TOOLS = {"Edit": "edit", "MultiEdit": "edit", "Write": "write", "NotebookEdit": "edit"}


class ClaudeCodeParser(StreamParser):
    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]:
        kind = obj.get("type")
        if kind == "system" and obj.get("subtype") == "init":
            self.model = str(obj.get("model") or self.model)
            return [
                AgentEvent(
                    "output",
                    {"stream": "agent", "text": f"Claude Code started (model {self.model})"},
                )
            ]
        if kind == "assistant":
            return self._assistant(obj.get("message") or {})
        if kind == "user":
            return self._tool_results(obj.get("message") or {})
        if kind == "result":
            return self._result(obj)
        return []

    def _assistant(self, message: dict[str, Any]) -> list[AgentEvent]:
        self.model = str(message.get("model") or self.model)
        events = []
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                events.append(AgentEvent("message", {"text": block["text"]}))
            elif block.get("type") == "thinking" and block.get("thinking"):
                events.append(AgentEvent("reasoning", {"text": block["thinking"]}))
            elif block.get("type") == "tool_use":
                name, arguments = str(block.get("name") or ""), block.get("input") or {}
                events.append(
                    AgentEvent(
                        "tool_call", {"id": block.get("id"), "name": name, "arguments": arguments}
                    )
                )
                if name in EDIT_TOOLS and isinstance(arguments, dict):
                    path = arguments.get("file_path") or arguments.get("notebook_path")
                    events.append(
                        AgentEvent(
                            "file_edit",
                            {"path": workspace_path(path), "action": EDIT_TOOLS[name]},
                        )
                    )
        return events

    def _tool_results(self, message: dict[str, Any]) -> list[AgentEvent]:
        content = message.get("content")
        if not isinstance(content, list):
            return []  # the prompt echoed back
        return [
            AgentEvent(
                "tool_result",
                {
                    "id": block.get("tool_use_id"),
                    "ok": not block.get("is_error"),
                    "output": text_of(block.get("content")),
                },
            )
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    def _result(self, obj: dict[str, Any]) -> list[AgentEvent]:
        usage = obj.get("usage") or {}
        events = [
            AgentEvent(
                "usage",
                {
                    "provider": "anthropic",
                    "model": self.model,
                    "input_tokens": int(usage.get("input_tokens") or 0)
                    + int(usage.get("cache_creation_input_tokens") or 0)
                    + int(usage.get("cache_read_input_tokens") or 0),
                    "output_tokens": int(usage.get("output_tokens") or 0),
                    "cost_usd": obj.get("total_cost_usd"),
                    "steps": obj.get("num_turns"),
                    "duration_ms": obj.get("duration_ms"),
                },
            )
        ]
        if obj.get("is_error") or obj.get("subtype") not in (None, "success"):
            detail = obj.get("result") or "; ".join(map(str, obj.get("errors") or []))
            message = f"Claude Code ended with {obj.get('subtype') or 'an error'}"
            events.append(
                AgentEvent("error", {"message": f"{message}: {detail}" if detail else message})
            )
        return events


def process_env() -> dict[str, str]:
    """Claude Code's process environment: its key and, for a custom endpoint, its base URL."""
    from django.conf import settings

    from sessions.agents import custom_anthropic_base

    if not settings.ANTHROPIC_API_KEY:
        raise AgentError("the claude-code agent needs ANTHROPIC_API_KEY to be set")
    env = {
        "ANTHROPIC_API_KEY": settings.ANTHROPIC_API_KEY,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if custom_anthropic_base():
        env["ANTHROPIC_BASE_URL"] = custom_anthropic_base()
    return env


class ClaudeCodeAgent(CliAgent):
    name = "claude-code"
    binary = "claude"
    package = "@anthropic-ai/claude-code"
    label = "Claude Code"

    def argv(self, turn: Turn) -> list[str]:
        # stream-json in print mode needs --verbose; the sandbox is the permission boundary.
        argv = [
            "claude", "-p", "--output-format", "stream-json", "--verbose",
            "--dangerously-skip-permissions", "--max-turns", str(turn.limits.steps),
        ]  # fmt: skip
        if self.model:
            argv += ["--model", self.model]
        if turn.instructions and not _has_claude_md(turn):
            # Claude Code reads CLAUDE.md itself; an AGENTS.md-only repository still counts.
            argv += ["--append-system-prompt", turn.instructions]
        return argv

    def parser(self) -> StreamParser:
        return ClaudeCodeParser(model=self.model)


def _has_claude_md(turn: Turn) -> bool:
    try:
        turn.sandbox.read_file("CLAUDE.md")
    except (OSError, SandboxError):  # absent or unreadable: the instructions are passed on
        return False
    return True
