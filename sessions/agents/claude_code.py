"""Claude Code (`@anthropic-ai/claude-code`), run as `claude -p --output-format stream-json`.

The stream is one JSON object per line (the Agent SDK's SDKMessage types,
https://docs.claude.com/en/docs/agent-sdk/typescript#message-types and
https://docs.claude.com/en/docs/claude-code/headless), as 2.1.197 prints them:

* ``{"type": "system", "subtype": "init", "session_id", "model", "tools", "cwd", ...}``
* ``{"type": "system", "subtype": "api_retry", "attempt", "max_retries", "error_status",
  "error"}`` before each retry of a failed API request
* ``{"type": "assistant", "message": {Anthropic Messages API message: content blocks of type
  text / thinking / tool_use}, "parent_tool_use_id", "session_id"}``; a request the API refused
  comes back as a ``"<synthetic>"`` model's message with ``"error"`` (e.g. ``model_not_found``)
* ``{"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
  "tool_use_id", "content", "is_error"}]}, ...}``
* ``{"type": "result", "subtype": "success" | "error_max_turns" | "error_during_execution" | ...,
  "is_error", "api_error_status", "result", "errors", "num_turns", "duration_ms",
  "total_cost_usd", "usage": {...}, "modelUsage": {...}}``

Configuration (what 2.1.197 reads): the key and base URL (without /v1) from the environment —
the model gateway's Anthropic route and the turn's token, never the provider key —
the model from --model, its config and sessions in $CLAUDE_CONFIG_DIR (the adapter's state
directory, which the session's snapshot carries to the next turn, where --resume continues the
conversation). No settings file is read (--setting-sources ""): a repository's .claude/settings
and .mcp.json — or settings planted in the state directory, which lives in the workspace — could
otherwise run hooks, an apiKeyHelper or MCP servers with the key, or move the base URL.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from sessions.agents.base import AgentEvent, Turn, attributed
from sessions.agents.cli_process import CliAgent, StreamParser, text_of, workspace_path
from sessions.model_access import GatewayRoute
from snapshots.sandbox import SandboxError

EDIT_TOOLS = {"Edit": "edit", "MultiEdit": "edit", "Write": "write", "NotebookEdit": "edit"}
# What 2.1.197 says (in the result's `errors`) when --resume names a session it does not have
# (a UUID it has no transcript of; anything else, e.g. another CLI's session id).
NO_CONVERSATION = ("No conversation found with session ID", "--resume requires a valid session")
# The model name of the messages Claude Code makes up itself (an API error shown as a reply).
SYNTHETIC = "<synthetic>"
# Claude Code's own settings, the same in every run (not secret): no updates, telemetry, error
# reports or other traffic besides the model's API; few retries (its default is 10, with
# backoff to ~40 s, several minutes for an endpoint that refuses); IS_SANDBOX lets
# --dangerously-skip-permissions run where the sandbox's user is root in its namespace.
CLAUDE_ENV = {
    "IS_SANDBOX": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "3",
}


class ClaudeCodeParser(StreamParser):
    def __init__(self, *, model: str = "") -> None:
        super().__init__(model=model)
        # Set when --resume named a session Claude Code no longer has (its words).
        self.lost_conversation = ""
        # The API's refusal as the stream states it (status, error code), for the failure.
        self._api_error = ""

    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]:
        kind = obj.get("type")
        if kind == "system" and obj.get("subtype") == "init":
            self.model = str(obj.get("model") or self.model)
            self.resume_id = str(obj.get("session_id") or self.resume_id)
            return [
                AgentEvent(
                    "output",
                    {"stream": "agent", "text": f"Claude Code started (model {self.model})"},
                )
            ]
        if kind == "system" and obj.get("subtype") == "api_retry":
            return [AgentEvent("notice", {"message": _retry_notice(obj)})]
        if kind == "assistant":
            return self._assistant(obj)
        if kind == "user":
            return self._tool_results(obj.get("message") or {})
        if kind == "result":
            return self._result(obj)
        return []

    def _assistant(self, obj: dict[str, Any]) -> list[AgentEvent]:
        message = obj.get("message") or {}
        if message.get("model") == SYNTHETIC and obj.get("error"):
            # Claude Code's own text for a refused request: the result repeats it as the
            # turn's failure; what the API said is kept for it.
            self._api_error = str(obj.get("error"))
            return []
        if message.get("model") and message.get("model") != SYNTHETIC:
            self.model = str(message["model"])
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
        errors = [str(e) for e in obj.get("errors") or []]
        lost = next((e for e in errors if any(m in e for m in NO_CONVERSATION)), "")
        if lost and not obj.get("num_turns"):
            # Nothing ran: the caller starts a new conversation instead (a notice, no error).
            self.lost_conversation = lost
            self.resume_id = ""
            return []
        self.resume_id = str(obj.get("session_id") or self.resume_id)
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
        subtype = obj.get("subtype")
        if obj.get("is_error") or subtype not in (None, "success"):
            detail = str(obj.get("result") or "; ".join(errors)).strip()
            if subtype in (None, "success"):
                message = f"Claude Code: {detail or 'the turn ended with an error'}"
            else:
                message = f"Claude Code ended with {subtype}" + (f": {detail}" if detail else "")
            api = " ".join(str(p) for p in (obj.get("api_error_status"), self._api_error) if p)
            if api:
                message += f" (API error {api})"
            events.append(AgentEvent("error", {"message": message}))
        return events


def _retry_notice(obj: dict[str, Any]) -> str:
    why = " ".join(str(p) for p in (obj.get("error_status"), obj.get("error")) if p)
    attempt = f"attempt {obj.get('attempt')} of {obj.get('max_retries')}"
    return f"Claude Code retries the model API request ({attempt}){': ' + why if why else ''}"


def process_env(route: GatewayRoute) -> dict[str, str]:
    """Claude Code's process environment: the model gateway as its Anthropic API (Claude Code
    adds /v1 itself) and the turn's token as its key; the provider key stays in the gateway."""
    return {"ANTHROPIC_BASE_URL": route.anthropic_base, "ANTHROPIC_API_KEY": route.token}


class ClaudeCodeAgent(CliAgent):
    name = "claude-code"
    binary = "claude"
    package = "@anthropic-ai/claude-code"
    label = "Claude Code"
    _parser: ClaudeCodeParser | None = None

    def argv(self, turn: Turn) -> list[str]:
        # stream-json in print mode needs --verbose; the sandbox is the permission boundary.
        # No settings or MCP servers but the platform's (see the module's docstring).
        argv = [
            "claude", "-p", "--output-format", "stream-json", "--verbose",
            "--dangerously-skip-permissions", "--setting-sources", "", "--strict-mcp-config",
            "--max-turns", str(turn.limits.steps),
            # The turn's cost limit enforced by Claude Code itself, between its API calls (its
            # usage reaches us only in the final result).
            "--max-budget-usd", f"{turn.limits.cost_usd:g}",
        ]  # fmt: skip
        if turn.images:
            argv += ["--input-format", "stream-json"]
        if turn.conversation.resume_id:
            argv += ["--resume", turn.conversation.resume_id]
        if self.model:
            argv += ["--model", self.model]
        instructions = _instructions(turn)
        if instructions:
            argv += ["--append-system-prompt", instructions]
        return argv

    def state_env(self) -> dict[str, str]:
        return {"CLAUDE_CONFIG_DIR": self.state_dir(), **CLAUDE_ENV}

    def prompt_file(self, turn: Turn) -> bytes | None:
        """With images: the prompt as one stream-json user message, text then image blocks."""
        if not turn.images:
            return None
        content: list[dict[str, Any]] = [
            {"type": "text", "text": attributed(turn.prompt, turn.author)}
        ]
        for image in turn.images:
            data = base64.b64encode(image.data).decode()
            source = {"type": "base64", "media_type": image.media_type, "data": data}
            content.append({"type": "image", "source": source})
        message = {
            "type": "user",
            "session_id": "",
            "parent_tool_use_id": None,
            "message": {"role": "user", "content": content},
        }
        return (json.dumps(message) + "\n").encode()

    def parser(self) -> StreamParser:
        self._parser = ClaudeCodeParser(model=self.model)
        return self._parser

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        """A turn; one whose earlier conversation Claude Code no longer has (its state did not
        survive) says so and starts a new conversation instead."""
        resuming = bool(turn.conversation.resume_id)
        self._parser = None
        for event in super().run(turn):
            lost = self._parser.lost_conversation if resuming and self._parser else ""
            if lost and event.kind in ("error", "done") and not self._stopped.is_set():
                if event.kind == "done":
                    yield AgentEvent(
                        "notice",
                        {
                            "message": f"could not resume the earlier conversation: {lost}; "
                            "starting a new one"
                        },
                    )
                    turn.conversation.resume_id = ""
                    yield from super().run(turn)
                    return
                continue  # the failed attempt's exit status: the new one replaces it
            yield event


def _instructions(turn: Turn) -> str:
    """The repository's instructions (AGENTS.md, else CLAUDE.md), and CLAUDE.md as well when
    it has both: with no setting sources, Claude Code does not read CLAUDE.md itself."""
    instructions = turn.instructions.strip()
    try:
        claude_md = turn.sandbox.read_file("CLAUDE.md").decode(errors="replace")[:32_000].strip()
    except (OSError, SandboxError):  # absent or unreadable
        claude_md = ""
    if claude_md and claude_md not in instructions:
        instructions = f"{instructions}\n\n{claude_md}".strip()
    return instructions
