"""Running a coding-agent CLI (Claude Code, Codex, OpenCode) inside the sandbox.

Each adapter names its binary and npm package, builds its argv, and parses its documented JSON
event stream, one stdout line at a time, into AgentEvents. The prompt reaches the CLI on stdin
(from $INSPECT_PROMPT, so it is never parsed as an option; or, for an adapter whose `prompt_file`
gives one — a JSON message with images, say — from that file, $INSPECT_PROMPT_FILE, written into
the adapter's state directory for the run and removed after it); the CLI's key — its turn's token
for the model gateway, never a provider key — is in that process's environment only, never in a
file, and the runtime wrapper scrubs it from every event.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import threading
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any

from sessions.agents.base import AgentError, AgentEvent, AgentRuntime, Turn, attributed
from sessions.agents.pricing import usd
from snapshots import agent_installs
from snapshots.sandbox import WORKSPACE, ExecHandle, SandboxError

log = logging.getLogger(__name__)

# Reads the prompt from the environment (or its file) onto the CLI's stdin; "$@" is the CLI's
# argv. A pipe, not a redirect: Claude Code's stream-json input reads nothing from a plain file.
PIPE_PROMPT = (
    'if [ -n "${INSPECT_PROMPT_FILE:-}" ]; then cat "$INSPECT_PROMPT_FILE"; '
    'else printf "%s" "$INSPECT_PROMPT"; fi | exec "$@"'
)
# Where a CLI keeps its own state (sessions, config): inside the workspace's .git, so the
# session's snapshot carries it to the next turn's restore, and git never tracks or diffs it.
STATE_ROOT = WORKSPACE + "/.git/inspect-agent"


# Environment names that hold credentials (the agent's own secrets are all masked too).
SECRET_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)
MIN_SECRET_LENGTH = 8
# Terminal colours some CLIs print even on a pipe.
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Runs in the sandbox: masks the secrets given as INSPECT_SCRUB_* in every file under argv.
SCRUB = r"""
import os, sys
keys = [v.encode() for k, v in os.environ.items() if k.startswith("INSPECT_SCRUB_")]
for top in sys.argv[1:]:
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            new = data
            for key in keys:
                new = new.replace(key, b"*" * len(key))
            if new != data:
                with open(path, "r+b") as handle:
                    handle.write(new)
"""


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
    as output (the first is remembered: a CLI whose output no longer parses is named by it).

    `failure` is the CLI's own message for a failed turn (the first `error` event a parser
    yields); warnings are yielded as `notice` events instead and fail nothing. `resume_id` is
    the CLI's session id, which the next turn resumes; `recognised` counts parsed lines.
    `abandon`: set by a parser whose CLI will not end by itself (it retries an unreachable
    model forever) after yielding the error that explains why; the CLI is then stopped."""

    def __init__(self, *, model: str = "") -> None:
        self.model = model
        self.failure = ""
        self.resume_id = ""
        self.abandon = False
        self.recognised = 0
        self.unparsed = ""

    @property
    def error_reported(self) -> bool:
        return bool(self.failure)

    def feed(self, line: str) -> list[AgentEvent]:
        stripped = line.strip()
        if not stripped:
            return []
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            self.unparsed = self.unparsed or stripped[:300]
            return [AgentEvent("output", {"stream": "stdout", "text": line})]
        events = self.parse(obj)
        if events:
            self.recognised += 1
        for event in events:
            if event.kind == "error" and not self.failure and "limit" not in event.data:
                self.failure = str(event.data.get("message") or "")
        return events

    @abstractmethod
    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]: ...


class CliAgent(AgentRuntime):
    """`env`: what the CLI needs (its key, base URL) — given to its process only."""

    binary: str
    package: str
    label: str
    # The CLI's version, for messages that must name it (set by whoever builds the runtime).
    version: str = ""

    def __init__(self, *, env: Mapping[str, str], model: str = "") -> None:
        self.process_env = dict(env)
        self.model = model
        self._handle: ExecHandle | None = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._stderr_tail = ""

    @abstractmethod
    def argv(self, turn: Turn) -> list[str]: ...

    @abstractmethod
    def parser(self) -> StreamParser: ...

    def describe(self) -> str:
        """The runtime and its version, as failure messages name them."""
        return f"{self.label} {self.version}".strip()

    def state_dir(self) -> str:
        """This CLI's own state directory in the sandbox (see STATE_ROOT)."""
        return f"{STATE_ROOT}/{self.name}"

    def state_env(self) -> dict[str, str]:
        """Environment pointing the CLI's state (sessions, config) into `state_dir`."""
        return {}

    def prepare(self, turn: Turn) -> None:
        """Called once `state_dir` exists, before the CLI starts (files it needs, its state
        checked); raise AgentError to refuse the turn."""

    def prompt_file(self, turn: Turn) -> bytes | None:
        """What the CLI reads on stdin instead of the attributed prompt (e.g. a JSON message
        carrying the turn's images), or None for the prompt itself."""
        return None

    def executable(self, turn: Turn) -> str:
        """The CLI this turn runs: the platform's pinned version (on the sandbox's PATH), or
        the version the repository's recipe pins (`agent_versions`), or — for tests of parser
        edge cases with canned scripts — `cli_binary`."""
        override = turn.options.get("cli_binary")
        if override:
            return str(override)
        pinned = (turn.options.get("agent_versions") or {}).get(self.name)
        self.version = pinned or agent_installs.PINNED[self.name].version
        if pinned:
            return agent_installs.sandbox_binary(self.name, pinned)
        return self.binary

    def missing_message(self) -> str:
        return (
            f"{self.describe()} is not installed on this platform: the platform installs its "
            "agent CLIs at start-up; run `manage.py inspect doctor --install-agents` (or see "
            "what `manage.py inspect doctor` says about it)"
        )

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        try:
            executable = self.executable(turn)
        except agent_installs.InstallError as exc:
            raise AgentError(str(exc)) from None
        check = turn.sandbox.run(
            ["/bin/sh", "-c", f"command -v {shlex.quote(executable)}"],
            secrets=turn.env,  # the same PATH and secrets as the CLI itself
            timeout=30,
        )
        if check.exit_code != 0:
            raise AgentError(self.missing_message())
        made = turn.sandbox.run(["mkdir", "-p", self.state_dir()], timeout=30)
        if made.exit_code != 0:
            raise AgentError(
                f"cannot make {self.label}'s state directory {self.state_dir()}: "
                f"{(made.stderr or made.stdout).strip()[:300]}"
            )
        self.prepare(turn)
        # The CLI's key and the agent's secrets: contained, so nothing it leaves behind (and
        # no other command, while it runs) can read them.
        secrets = {**turn.env, **self.process_env}
        argv = ["/bin/sh", "-c", PIPE_PROMPT, "sh", *self.command(turn)]
        env = {"INSPECT_PROMPT": attributed(turn.prompt, turn.author), **self.state_env()}
        stdin = self.prompt_file(turn)
        if stdin is not None:
            env["INSPECT_PROMPT_FILE"] = f"{self.state_dir()}/prompt"
            turn.sandbox.write_file(env["INSPECT_PROMPT_FILE"], stdin, mode=0o600)
        with self._lock:
            if self._stopped.is_set():
                yield AgentEvent("done", {"stopped": True})
                return
            self._handle = turn.sandbox.exec(
                argv,
                env=env,
                secrets=secrets,
                cwd=WORKSPACE,
                timeout=turn.limits.wall_seconds,
            )
        parser = self.parser()
        tokens = 0
        cost = 0.0
        over: tuple[str, str] | None = None
        self._stderr_tail = ""
        for line in self._handle:
            if line.stream == "stderr":
                self._stderr_tail = (self._stderr_tail + line.text.rstrip("\n") + "\n")[-2000:]
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
            if parser.abandon and over is None:
                self._handle.kill()  # parser.failure says why
        result = self._handle.wait()
        if stdin is not None:
            turn.sandbox.run(["rm", "-f", env["INSPECT_PROMPT_FILE"]], timeout=30)
        self._scrub_state(turn, secrets)
        # The CLI's session, even of a failed turn, is what the next turn resumes.
        if parser.resume_id:
            turn.conversation.resume_id = parser.resume_id
        if self._stopped.is_set():
            yield AgentEvent("done", {"stopped": True, "exit_code": result.exit_code})
            return
        failed = ""
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
        elif parser.failure:
            failed = parser.failure  # the CLI's or the API's own words, already in the log
        elif result.exit_code != 0 or not parser.recognised:
            failed = self._unexplained_failure(parser, result.exit_code)
            yield AgentEvent("error", {"message": failed})
        done: dict[str, Any] = {"exit_code": result.exit_code}
        if failed:
            done["failed"] = failed
        yield AgentEvent("done", done)

    def _scrub_state(self, turn: Turn, secrets: Mapping[str, str]) -> None:
        """Mask every secret the CLI's process held wherever the CLI keeps its transcripts
        (its state dir travels in the session's snapshot) and in /tmp: a command the model ran
        may have printed one. Same-length masks keep binary stores (SQLite) intact."""
        masked = {
            f"INSPECT_SCRUB_{n}": value
            for n, (name, value) in enumerate(secrets.items())
            if len(value) >= MIN_SECRET_LENGTH and (name in turn.env or SECRET_NAME_RE.search(name))
        }
        if not masked:
            return
        try:
            done = turn.sandbox.run(
                ["python3", "-I", "-S", "-c", SCRUB, self.state_dir(), "/tmp", "/var/tmp"],
                secrets=masked,
                timeout=120,
            )
        except SandboxError as exc:
            log.warning("could not scrub %s's state: %s", self.label, exc)
            return
        if done.exit_code != 0:
            log.warning("could not scrub %s's state: %s", self.label, done.stderr[-300:])

    def _unexplained_failure(self, parser: StreamParser, exit_code: int | None) -> str:
        """Why a turn failed when the CLI did not say: its output did not parse, or it exited
        non-zero (with the last thing it printed on stderr)."""
        who = self.describe()
        if parser.unparsed and not parser.recognised:
            return (
                f"{who}: its output no longer parses as this adapter expects; the first line "
                f"that did not: {parser.unparsed!r}"
            )
        if not parser.recognised and exit_code == 0:
            return f"{who} printed no events this adapter recognises"
        tail = ANSI_RE.sub("", self._stderr_tail).strip().splitlines()
        said = f": {tail[-1][:300]}" if tail else ""
        return f"{who} exited with status {exit_code}{said}"

    def command(self, turn: Turn) -> list[str]:
        """The CLI's command line: `argv` with its first word the `executable` to run."""
        return [self.executable(turn), *self.argv(turn)[1:]]

    def process_command(self, turn: Turn) -> str | None:
        try:
            return shlex.join(self.command(turn))
        except agent_installs.InstallError:
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
