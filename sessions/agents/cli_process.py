"""Running a coding-agent CLI (Claude Code, Codex, OpenCode) inside the sandbox.

Each adapter names its binary and npm package, builds its argv, and parses its documented JSON
event stream, one stdout line at a time, into AgentEvents. The prompt reaches the CLI on stdin
(from $INSPECT_PROMPT, so it is never parsed as an option); the model key is in that process's
environment only — never in a file — and the runtime wrapper scrubs it from every event.
"""

from __future__ import annotations

import json
import shlex
import threading
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any

from sessions.agents.base import AgentError, AgentEvent, AgentRuntime, Turn
from sessions.agents.pricing import usd
from snapshots.sandbox import WORKSPACE, ExecHandle

# Reads the prompt from the environment onto the CLI's stdin; "$@" is the CLI's argv.
PIPE_PROMPT = 'printf "%s" "$INSPECT_PROMPT" | exec "$@"'


def workspace_path(path: Any) -> str:
    """A path as the session's diff shows it: relative to the repository root."""
    text = str(path or "")
    if text == WORKSPACE:
        return "."
    return text.removeprefix(WORKSPACE + "/")


def text_of(content: Any) -> str:
    """Text of a tool result that is either a string or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in content
        )
    return "" if content is None else json.dumps(content)


class StreamParser:
    """Turns one CLI's JSON lines into AgentEvents. Lines that are not JSON objects are kept
    as output; `error_reported` tells the runtime the CLI already explained a failure."""

    def __init__(self, *, model: str = "") -> None:
        self.model = model
        self.error_reported = False

    def feed(self, line: str) -> list[AgentEvent]:
        stripped = line.strip()
        if not stripped:
            return []
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            return [AgentEvent("output", {"stream": "stdout", "text": line})]
        events = self.parse(obj)
        if any(e.kind == "error" for e in events):
            self.error_reported = True
        return events

    @abstractmethod
    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]: ...


class CliAgent(AgentRuntime):
    """`env`: what the CLI needs (its key, base URL) — given to its process only."""

    binary: str
    package: str
    label: str

    def __init__(self, *, env: Mapping[str, str], model: str = "") -> None:
        self.process_env = dict(env)
        self.model = model
        self._handle: ExecHandle | None = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    @abstractmethod
    def argv(self, turn: Turn) -> list[str]: ...

    @abstractmethod
    def parser(self) -> StreamParser: ...

    def missing_message(self) -> str:
        return (
            f"{self.label} is not installed in this repository's sandbox (no `{self.binary}` "
            f'on PATH): add "npm install -g {self.package}" to `setup` in '
            ".inspect/environment.toml (its egress must allow the npm registry and the "
            "model API), then refresh the snapshot"
        )

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        check = turn.sandbox.run(
            ["/bin/sh", "-c", f"command -v {shlex.quote(self.binary)}"],
            secrets=turn.env,  # the same PATH and secrets as the CLI itself
            timeout=30,
        )
        if check.exit_code != 0:
            raise AgentError(self.missing_message())
        # The CLI's key and the agent's secrets: contained, so nothing it leaves behind (and
        # no other command, while it runs) can read them.
        secrets = {**turn.env, **self.process_env}
        argv = ["/bin/sh", "-c", PIPE_PROMPT, "sh", *self.argv(turn)]
        with self._lock:
            if self._stopped.is_set():
                yield AgentEvent("done", {"stopped": True})
                return
            self._handle = turn.sandbox.exec(
                argv,
                env={"INSPECT_PROMPT": turn.prompt},
                secrets=secrets,
                cwd=WORKSPACE,
                timeout=turn.limits.wall_seconds,
            )
        parser = self.parser()
        tokens = 0
        cost = 0.0
        over: tuple[str, str] | None = None
        for line in self._handle:
            if line.stream == "stderr":
                yield AgentEvent("output", {"stream": "stderr", "text": line.text})
                continue
            for event in parser.feed(line.text):
                yield event
                if event.kind == "usage" and over is None:
                    tokens += int(event.data.get("input_tokens") or 0)
                    tokens += int(event.data.get("output_tokens") or 0)
                    cost += float(event.data.get("cost_usd") or 0.0)
                    over = _over_limit(turn, tokens, cost)
                    if over:
                        self._handle.kill()  # the CLI's own loop has no such limit
        result = self._handle.wait()
        if self._stopped.is_set():
            yield AgentEvent("done", {"stopped": True, "exit_code": result.exit_code})
            return
        if over:
            yield AgentEvent("error", {"message": over[1], "limit": over[0]})
        elif result.limit_hit:
            yield AgentEvent(
                "error",
                {
                    "message": f"{self.label} hit the sandbox's {result.limit_hit} limit",
                    "limit": result.limit_hit,
                },
            )
        elif result.exit_code != 0 and not parser.error_reported:
            yield AgentEvent(
                "error", {"message": f"{self.binary} exited with status {result.exit_code}"}
            )
        yield AgentEvent("done", {"exit_code": result.exit_code})

    def process_command(self, turn: Turn) -> str | None:
        return shlex.join(self.argv(turn))

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            handle = self._handle
        if handle is not None:
            handle.kill()


def _over_limit(turn: Turn, tokens: int, cost: float) -> tuple[str, str] | None:
    kept = "the work so far is kept"
    if tokens >= turn.limits.tokens:
        return (
            "tokens",
            f"the turn used {tokens:,} tokens, its limit is {turn.limits.tokens:,}; {kept}",
        )
    if cost >= turn.limits.cost_usd:
        return (
            "cost",
            f"the turn cost ${cost:.4f}, its limit is {usd(turn.limits.cost_usd)}; {kept}",
        )
    return None
