"""Codex (`@openai/codex`), run as `codex exec --json`.

The stream is JSON Lines of thread events (openai/codex docs/exec.md, "JSON output mode", and
codex-rs/exec/src/exec_events.rs):

* ``{"type": "thread.started", "thread_id"}``, ``{"type": "turn.started"}``
* ``{"type": "item.started" | "item.updated" | "item.completed", "item": {"id", "type", ...}}``
  with item types agent_message (text), reasoning (text), command_execution (command,
  aggregated_output, exit_code, status), file_change (changes: [{path, kind: add | delete |
  update}], status), mcp_tool_call (server, tool, arguments, result, error, status),
  web_search (query), todo_list (items), error (message)
* ``{"type": "turn.completed", "usage": {"input_tokens", "cached_input_tokens",
  "output_tokens"}}``, ``{"type": "turn.failed", "error": {"message"}}``,
  ``{"type": "error", "message"}``
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessions.agents import pricing
from sessions.agents.base import AgentError, AgentEvent, Turn
from sessions.agents.cli_process import CliAgent, StreamParser, text_of, workspace_path


class CodexParser(StreamParser):
    def __init__(self, *, model: str = "", prices: Mapping[str, tuple[float, float]] | None = None):
        super().__init__(model=model)
        self.prices = prices
        self._started: set[str] = set()

    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]:
        kind = obj.get("type")
        item = obj.get("item") if isinstance(obj.get("item"), dict) else {}
        if kind == "item.started":
            return self._call(item)
        if kind == "item.completed":
            return self._completed(item)
        if kind == "turn.completed":
            usage = obj.get("usage") or {}
            given, taken = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
            return [
                AgentEvent(
                    "usage",
                    {
                        "provider": "openai",
                        "model": self.model or None,
                        "input_tokens": given,
                        "cached_input_tokens": int(usage.get("cached_input_tokens") or 0),
                        "output_tokens": taken,
                        "cost_usd": pricing.cost_usd(self.model, given, taken, self.prices)
                        if self.model
                        else None,
                    },
                )
            ]
        if kind == "turn.failed":
            error = obj.get("error") or {}
            return [AgentEvent("error", {"message": f"Codex: {error.get('message') or error}"})]
        if kind == "error":
            return [AgentEvent("error", {"message": f"Codex: {obj.get('message')}"})]
        return []

    def _call(self, item: dict[str, Any]) -> list[AgentEvent]:
        kind, item_id = item.get("type"), str(item.get("id") or "")
        if kind == "command_execution":
            name, arguments = "shell", {"command": item.get("command")}
        elif kind == "mcp_tool_call":
            name = f"{item.get('server')}.{item.get('tool')}"
            arguments = item.get("arguments") or {}
        elif kind == "web_search":
            name, arguments = "web_search", {"query": item.get("query")}
        else:
            return []
        if item_id in self._started:
            return []
        self._started.add(item_id)
        return [AgentEvent("tool_call", {"id": item_id, "name": name, "arguments": arguments})]

    def _completed(self, item: dict[str, Any]) -> list[AgentEvent]:
        kind, item_id = item.get("type"), str(item.get("id") or "")
        if kind == "agent_message":
            return [AgentEvent("message", {"text": item.get("text") or ""})]
        if kind == "reasoning":
            return [AgentEvent("reasoning", {"text": item.get("text") or ""})]
        if kind == "todo_list":
            lines = [
                f"[{'x' if t.get('completed') else ' '}] {t.get('text')}"
                for t in item.get("items") or []
                if isinstance(t, dict)
            ]
            return [AgentEvent("reasoning", {"text": "plan:\n" + "\n".join(lines)})]
        if kind == "file_change":
            return [
                AgentEvent(
                    "file_edit",
                    {
                        "path": workspace_path(change.get("path")),
                        "action": change.get("kind"),
                        "status": item.get("status"),
                    },
                )
                for change in item.get("changes") or []
                if isinstance(change, dict)
            ]
        if kind == "error":
            return [AgentEvent("error", {"message": f"Codex: {item.get('message')}"})]
        events = self._call(item)  # a call seen only at completion still gets its tool_call
        if kind == "command_execution":
            exit_code = item.get("exit_code")
            ok = item.get("status") == "completed" and exit_code == 0
            events.append(
                AgentEvent(
                    "tool_result",
                    {
                        "id": item_id,
                        "name": "shell",
                        "ok": ok,
                        "exit_code": exit_code,
                        "output": item.get("aggregated_output") or "",
                    },
                )
            )
        elif kind == "mcp_tool_call":
            error = item.get("error") or {}
            result = item.get("result") or {}
            events.append(
                AgentEvent(
                    "tool_result",
                    {
                        "id": item_id,
                        "name": f"{item.get('server')}.{item.get('tool')}",
                        "ok": item.get("status") == "completed" and not error,
                        "output": error.get("message") or text_of(result.get("content")),
                    },
                )
            )
        elif kind == "web_search":
            events.append(
                AgentEvent("tool_result", {"id": item_id, "name": "web_search", "ok": True})
            )
        return events


def process_env() -> dict[str, str]:
    """Codex's process environment: its key and, for a custom endpoint, its base URL."""
    from django.conf import settings

    from sessions.agents import custom_openai_base

    if not settings.LLM_API_KEY:
        raise AgentError("the codex agent needs INSPECT_LLM_API_KEY (an OpenAI API key)")
    env = {"CODEX_API_KEY": settings.LLM_API_KEY}
    if custom_openai_base():
        env["OPENAI_BASE_URL"] = custom_openai_base()
    return env


class CodexAgent(CliAgent):
    name = "codex"
    binary = "codex"
    package = "@openai/codex"
    label = "Codex"

    def __init__(
        self, *, env: Mapping[str, str], model: str = "",
        prices: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(env=env, model=model)
        self.prices = prices

    def argv(self, turn: Turn) -> list[str]:
        # Codex's own sandbox cannot nest inside ours, which already confines it; "-" reads the
        # prompt from stdin.
        argv = [
            "codex", "exec", "--json", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
        ]  # fmt: skip
        if self.model:
            argv += ["--model", self.model]
        return [*argv, "-"]

    def parser(self) -> StreamParser:
        return CodexParser(model=self.model, prices=self.prices)
