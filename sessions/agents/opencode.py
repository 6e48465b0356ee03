"""OpenCode (`opencode-ai`), run as `opencode run --format json`.

Each line is ``{"type", "timestamp", "sessionID", ...}`` (packages/opencode/src/cli/cmd/run.ts,
`emit`), carrying a message part (packages/sdk types: ToolPart, TextPart, ReasoningPart,
StepFinishPart):

* ``step_start`` / ``step_finish``: ``part.tokens {input, output, reasoning, cache: {read,
  write}}`` and ``part.cost`` (USD) on finish
* ``text`` / ``reasoning``: ``part.text``
* ``tool_use``: ``part.tool``, ``part.callID``, ``part.state {status: completed | error, input,
  output | error, title}``, emitted once the tool has finished
* ``error``: ``error {name, data: {message}}``; newer versions end with ``done``
"""

from __future__ import annotations

from typing import Any

from sessions.agents.base import AgentError, AgentEvent, Turn
from sessions.agents.cli_process import CliAgent, StreamParser, workspace_path

EDIT_TOOLS = {"edit": "edit", "multiedit": "edit", "write": "write", "patch": "edit"}


class OpenCodeParser(StreamParser):
    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]:
        kind = obj.get("type")
        part = obj.get("part") if isinstance(obj.get("part"), dict) else {}
        if kind == "text" and part.get("text"):
            return [AgentEvent("message", {"text": part["text"]})]
        if kind == "reasoning" and part.get("text"):
            return [AgentEvent("reasoning", {"text": part["text"]})]
        if kind == "tool_use":
            return self._tool(part)
        if kind == "step_finish":
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            return [
                AgentEvent(
                    "usage",
                    {
                        "provider": "opencode",
                        "model": self.model or None,
                        "input_tokens": int(tokens.get("input") or 0)
                        + int(cache.get("read") or 0)
                        + int(cache.get("write") or 0),
                        "output_tokens": int(tokens.get("output") or 0)
                        + int(tokens.get("reasoning") or 0),
                        "cost_usd": part.get("cost"),
                        "reason": part.get("reason"),
                    },
                )
            ]
        if kind == "error":
            error = obj.get("error") or {}
            data = error.get("data") if isinstance(error, dict) else None
            message = (data or {}).get("message") if isinstance(data, dict) else None
            text = message or (error.get("name") if isinstance(error, dict) else error)
            return [AgentEvent("error", {"message": f"OpenCode: {text}"})]
        return []

    def _tool(self, part: dict[str, Any]) -> list[AgentEvent]:
        name = str(part.get("tool") or "")
        state = part.get("state") or {}
        arguments = state.get("input") or {}
        call_id = part.get("callID") or part.get("id")
        events = [AgentEvent("tool_call", {"id": call_id, "name": name, "arguments": arguments})]
        if name in EDIT_TOOLS and isinstance(arguments, dict) and arguments.get("filePath"):
            events.append(
                AgentEvent(
                    "file_edit",
                    {"path": workspace_path(arguments["filePath"]), "action": EDIT_TOOLS[name]},
                )
            )
        ok = state.get("status") == "completed"
        events.append(
            AgentEvent(
                "tool_result",
                {
                    "id": call_id,
                    "name": name,
                    "ok": ok,
                    "output": str(state.get("output") if ok else state.get("error") or ""),
                    "title": state.get("title"),
                },
            )
        )
        return events


def process_env() -> dict[str, str]:
    """OpenCode's process environment: whichever provider keys are configured."""
    from django.conf import settings

    from sessions.agents import custom_openai_base

    env = {}
    if settings.LLM_API_KEY:
        env["OPENAI_API_KEY"] = settings.LLM_API_KEY
        if custom_openai_base():
            env["OPENAI_BASE_URL"] = custom_openai_base()
    if settings.ANTHROPIC_API_KEY:
        env["ANTHROPIC_API_KEY"] = settings.ANTHROPIC_API_KEY
    if not env:
        raise AgentError(
            "the opencode agent needs INSPECT_LLM_API_KEY or ANTHROPIC_API_KEY to be set"
        )
    return env


class OpenCodeAgent(CliAgent):
    name = "opencode"
    binary = "opencode"
    package = "opencode-ai"
    label = "OpenCode"

    def argv(self, turn: Turn) -> list[str]:
        # OpenCode reads AGENTS.md itself and appends piped stdin to the message.
        argv = ["opencode", "run", "--format", "json"]
        if self.model:
            argv += ["--model", self.model]  # provider/model, e.g. anthropic/claude-sonnet-4-5
        return argv

    def parser(self) -> StreamParser:
        return OpenCodeParser(model=self.model)
