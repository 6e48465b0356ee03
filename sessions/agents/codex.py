"""Codex (`@openai/codex`), run as `codex exec --json` (checked against codex-cli 0.171.0).

The stream is JSON Lines of thread events (openai/codex docs/exec.md, "JSON output mode", and
codex-rs/exec/src/exec_events.rs):

* ``{"type": "thread.started", "thread_id"}``, ``{"type": "turn.started"}``
* ``{"type": "item.started" | "item.updated" | "item.completed", "item": {"id", "type", ...}}``
  with item types agent_message (text), reasoning (text), command_execution (command,
  aggregated_output, exit_code, status), file_change (changes: [{path, kind: add | delete |
  update}], status), mcp_tool_call (server, tool, arguments, result, error, status),
  web_search (query), todo_list (items), error (message: a warning, the turn goes on)
* ``{"type": "turn.completed", "usage": {"input_tokens", "cached_input_tokens",
  "output_tokens"}}`` (a resumed thread's totals so far, not the turn's),
  ``{"type": "turn.failed", "error": {"message"}}``, ``{"type": "error", "message"}`` (fatal,
  or "Reconnecting... n/5 (...)" while it retries)

How 0.171 is configured here, as observed (tests/sessions/agents/test_codex_real.py):

* It ignores OPENAI_BASE_URL: the endpoint is a custom provider given with ``-c`` (which also
  means no websocket attempt), its key read from CODEX_API_KEY (``env_key``). That endpoint is
  the model gateway's OpenAI route (Responses API) and the key the turn's token.
* CODEX_HOME is the adapter's state directory (kept in the session's snapshot), holding only
  the thread's rollout (sessions/) between turns: Codex loads ``$CODEX_HOME/.env`` over its own
  environment at start-up (so a command of an earlier turn could re-point its proxy or key), so
  everything else there is removed before each turn; ``--ignore-user-config`` and
  ``--ignore-rules`` skip its config.toml and rules, and a repository's ``.codex/`` is refused
  as an untrusted project.
* Its "shell snapshot" writes the whole shell environment, key included, to a file under
  CODEX_HOME (deleted only on a clean exit): turned off.
* The next turn resumes the thread: ``codex exec resume <thread id> -``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from sessions.agents import pricing
from sessions.agents import provider_accounts as accounts
from sessions.agents.base import AgentError, AgentEvent, Turn
from sessions.agents.cli_process import CliAgent, StreamParser, text_of, workspace_path
from sessions.model_access import GatewayRoute
from snapshots.sandbox import WORKSPACE

# Codex's key variable (the custom provider's env_key) and that provider's id.
KEY_ENV = "CODEX_API_KEY"
PROVIDER = "inspect"
DEFAULT_MODEL = "gpt-5-codex"
# Codex retries an unreachable API ("Reconnecting... waiting for network") without end; after
# this many of them (its own retries are over by then) the turn is abandoned.
NETWORK_WAITS = 3
RECONNECTING = "Reconnecting..."
THREAD_ID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$")


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            int(data.get("input_tokens") or 0),
            int(data.get("cached_input_tokens") or 0),
            int(data.get("output_tokens") or 0),
        )


class CodexParser(StreamParser):
    """`earlier`: the resumed thread's usage totals before this turn (turn.completed reports
    the thread's totals, so the turn's own usage is the difference). `base_url`: the API, for
    the message when it cannot be reached."""

    def __init__(
        self, *, model: str = "", prices: Mapping[str, tuple[float, float]] | None = None,
        earlier: Usage | None = None, base_url: str = "",
    ) -> None:  # fmt: skip
        super().__init__(model=model)
        self.prices = prices
        self.earlier = earlier or Usage()
        self.base_url = base_url
        self._started: set[str] = set()
        self._waits = 0

    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]:
        kind = obj.get("type")
        item = obj.get("item") if isinstance(obj.get("item"), dict) else {}
        if kind == "thread.started":
            self.resume_id = str(obj.get("thread_id") or "")
            return []
        if kind == "item.started":
            return self._call(item)
        if kind == "item.completed":
            return self._completed(item)
        if kind == "turn.completed":
            return [self._usage(Usage.of(obj.get("usage") or {}))]
        if kind == "turn.failed":
            error = obj.get("error") or {}
            message = f"Codex: {error.get('message') or error}"
            if message == self.failure:
                return []  # its `error` line said it already
            return [AgentEvent("error", {"message": message})]
        if kind == "error":
            return self._error(str(obj.get("message") or ""))
        return []

    def _usage(self, total: Usage) -> AgentEvent:
        earlier = self.earlier
        if total.input_tokens < earlier.input_tokens or total.output_tokens < earlier.output_tokens:
            earlier = Usage()  # not the thread's totals after all
        given = total.input_tokens - earlier.input_tokens
        taken = total.output_tokens - earlier.output_tokens
        return AgentEvent(
            "usage",
            {
                "provider": "openai",
                "model": self.model or None,
                "input_tokens": given,
                "cached_input_tokens": max(
                    0, total.cached_input_tokens - earlier.cached_input_tokens
                ),
                "output_tokens": taken,
                "cost_usd": pricing.cost_usd(self.model, given, taken, self.prices)
                if self.model
                else None,
            },
        )

    def _error(self, message: str) -> list[AgentEvent]:
        if not message.startswith(RECONNECTING):
            return [AgentEvent("error", {"message": f"Codex: {message}"})]
        events = [AgentEvent("notice", {"message": f"Codex: {message}"})]
        if "waiting for network" in message:
            self._waits += 1
            if self._waits >= NETWORK_WAITS and not self.abandon:
                self.abandon = True
                reason = message.partition("(")[2].rstrip(")") or message
                where = f" at {self.base_url}" if self.base_url else ""
                events.append(
                    AgentEvent(
                        "error",
                        {
                            "message": f"Codex cannot reach the model API{where} ({reason}); "
                            f"gave up after {NETWORK_WAITS} attempts to reconnect: is the "
                            "endpoint up, and does the sandbox's egress allow it?"
                        },
                    )
                )
        return events

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
        if kind == "error":  # a warning ("Model metadata ... not found", a transport fallback)
            return [AgentEvent("notice", {"message": f"Codex: {item.get('message')}"})]
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


def process_env(route: GatewayRoute) -> dict[str, str]:
    """Codex's process environment: the turn's token as its key, and the model gateway's
    OpenAI route as its base URL (which the adapter gives Codex as its provider's base_url:
    Codex ignores OPENAI_BASE_URL). The provider key stays in the gateway."""
    return {KEY_ENV: route.token, "OPENAI_BASE_URL": route.openai_base}


def default_model() -> str:
    """The model a Codex turn runs when the session names none: INSPECT_AGENT_MODELS' codex
    entry, else INSPECT_LLM_MODEL, else gpt-5-codex (always one, so usage has a cost)."""
    models = getattr(settings, "AGENT_MODELS", None) or {}
    return models.get("codex") or accounts.default_model() or DEFAULT_MODEL


def default_base_url() -> str:
    return accounts.openai_base_url()


IMAGE_SUFFIX = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}

# Before each turn, in CODEX_HOME ($1): everything but the thread rollouts goes (see the module
# docstring), then the resumed thread's ($2) rollout and its last token count are printed.
PREPARE = r"""
home=$1
case "$(realpath -m -- "$home")" in "$home") ;; *) rm -f -- "$home"; mkdir -p -- "$home" ;; esac
[ "$(realpath -m -- "$home")" = "$home" ] || { echo "not a directory of its own" >&2; exit 2; }
find "$home" -mindepth 1 -maxdepth 1 ! -name sessions -exec rm -rf -- {} +
[ -L "$home/sessions" ] && rm -f -- "$home/sessions"
[ -n "$2" ] || exit 0
rollout=$(find "$home/sessions" -type f -name "rollout-*-$2.jsonl" 2>/dev/null | head -n 1)
[ -n "$rollout" ] || exit 0
echo "rollout $rollout"
grep -F '"token_count"' "$rollout" | tail -n 1
"""


class CodexAgent(CliAgent):
    name = "codex"
    binary = "codex"
    package = "@openai/codex"
    label = "Codex"

    def __init__(
        self, *, env: Mapping[str, str], model: str = "",
        prices: Mapping[str, tuple[float, float]] | None = None, base_url: str = "",
    ) -> None:  # fmt: skip
        env = dict(env)
        given_base = env.pop("OPENAI_BASE_URL", "")  # Codex ignores it: see argv
        super().__init__(env=env, model=model or default_model())
        self.prices = prices
        self.base_url = (base_url or given_base or default_base_url()).rstrip("/")
        self._earlier: Usage | None = None
        self._resume = ""
        self._images: list[str] = []
        self._notices: list[AgentEvent] = []

    def state_env(self) -> dict[str, str]:
        return {"CODEX_HOME": self.state_dir()}

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        self._notices = []
        for event in super().run(turn):
            yield from self._notices  # what `prepare` found, before the CLI's first event
            self._notices = []
            yield event

    def prepare(self, turn: Turn) -> None:
        wanted = turn.conversation.resume_id
        if wanted and not THREAD_ID_RE.match(wanted):
            wanted = ""
        ran = turn.sandbox.run(
            ["/bin/sh", "-c", PREPARE, "sh", self.state_dir(), wanted], timeout=60
        )
        if ran.exit_code != 0:
            raise AgentError(
                f"cannot prepare {self.label}'s state directory {self.state_dir()}: "
                f"{(ran.stderr or ran.stdout).strip()[:300]}"
            )
        self._resume, self._earlier = "", None
        for line in ran.stdout.splitlines():
            if line.startswith("rollout "):
                self._resume = wanted
            elif self._resume:
                self._earlier = _thread_totals(line)
        if wanted and not self._resume:
            self._notices.append(
                AgentEvent(
                    "notice",
                    {
                        "message": f"Codex's thread {wanted} from the previous turn is not in "
                        "this sandbox; this turn starts a new one"
                    },
                )
            )
        self._images = []
        for n, image in enumerate(turn.images, 1):
            suffix = IMAGE_SUFFIX.get(image.media_type, "")
            path = f"{self.state_dir()}/images/{n}{suffix}"
            turn.sandbox.write_file(path.removeprefix(WORKSPACE + "/"), image.data)
            self._images.append(path)

    def argv(self, turn: Turn) -> list[str]:
        resume = self._resume if self._resume == turn.conversation.resume_id else ""
        argv = ["codex", "exec", *(["resume"] if resume else [])]
        # A provider of our own: Codex reads no OPENAI_BASE_URL, and this one has no websocket.
        for key, value in (
            ("model_provider", PROVIDER),
            (f"model_providers.{PROVIDER}.name", "Inspect"),
            (f"model_providers.{PROVIDER}.base_url", self.base_url),
            (f"model_providers.{PROVIDER}.env_key", KEY_ENV),
            (f"model_providers.{PROVIDER}.wire_api", "responses"),
            # It would write the shell's environment, the key included, under CODEX_HOME.
            ("features.shell_snapshot", False),
        ):
            argv += ["-c", f"{key}={json.dumps(value)}"]
        # Codex's own sandbox cannot nest inside ours, which already confines it; "-" reads the
        # prompt from stdin.
        argv += [
            "--ignore-user-config", "--ignore-rules", "--json", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", "--model", self.model,
        ]  # fmt: skip
        argv += [f"--image={path}" for path in self._images]
        return [*argv, *([resume] if resume else []), "-"]

    def parser(self) -> StreamParser:
        return CodexParser(
            model=self.model, prices=self.prices, earlier=self._earlier, base_url=self.base_url
        )


def _thread_totals(line: str) -> Usage | None:
    """The thread's usage totals from a rollout's token_count record."""
    try:
        record = json.loads(line)
        info = record["payload"]["info"]["total_token_usage"]
    except (ValueError, KeyError, TypeError):
        return None
    return Usage.of(info) if isinstance(info, dict) else None
