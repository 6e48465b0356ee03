"""OpenCode (`opencode-ai`), run as `opencode run --format json`.

Each line is ``{"type", "timestamp", "sessionID", ...}`` (packages/opencode/src/cli/cmd/run.ts,
`emit`), carrying a message part (packages/sdk types: ToolPart, TextPart, ReasoningPart,
StepFinishPart):

* ``step_start`` / ``step_finish``: ``part.tokens {input, output, reasoning, cache: {read,
  write}}`` and ``part.cost`` (USD) on finish
* ``text`` / ``reasoning``: ``part.text``
* ``tool_use``: ``part.tool``, ``part.callID``, ``part.state {status: completed | error, input,
  output | error, title}``, emitted once the tool has finished
* ``error``: ``error {name, data: {message, statusCode}}`` (the API's own words); the CLI then
  exits 1. There is no closing event: the process's exit ends the turn.

Configuration (checked against opencode-ai 1.18.33): everything is in OPENCODE_CONFIG_CONTENT —
the platform's providers with the model gateway's base URLs (OpenCode's convention includes
``/v1``), the turn's token by ``{env:…}`` reference, the model declared under its provider and
chosen with ``--model``. The repository's own opencode.json / .opencode/ are not read
(OPENCODE_DISABLE_PROJECT_CONFIG), so they cannot redirect the token; the instructions file is
named in the config instead. Sessions live in XDG_DATA_HOME under the state directory and
continue with ``--session <id>``; the prompt comes on stdin; images are attached with ``--file``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from django.conf import settings

from sessions.agents import provider_accounts as accounts
from sessions.agents.base import AgentError, AgentEvent, Turn
from sessions.agents.cli_process import CliAgent, StreamParser, workspace_path
from sessions.agents.pricing import price_of
from sessions.agents.provider_accounts import custom_openai_base
from sessions.agents.providers import DEFAULT_MODELS, llm_provider
from sessions.model_access import GatewayRoute
from snapshots.sandbox import WORKSPACE, SandboxError

EDIT_TOOLS = {"edit": "edit", "multiedit": "edit", "write": "write", "patch": "edit"}


# What OpenCode prints (stderr, exit 1) for a --session it does not have.
LOST_SESSION = "Session not found"


class OpenCodeParser(StreamParser):
    """`priced`: whether OpenCode knows the model's price; when it does not, its cost of 0 is
    reported as unknown (None), never as free."""

    def __init__(self, *, model: str = "", priced: bool = True) -> None:
        super().__init__(model=model)
        self.priced = priced

    def parse(self, obj: dict[str, Any]) -> list[AgentEvent]:
        kind = obj.get("type")
        if isinstance(obj.get("sessionID"), str) and obj["sessionID"]:
            self.resume_id = obj["sessionID"]  # what `--session` continues next turn
        part = obj.get("part") if isinstance(obj.get("part"), dict) else {}
        if kind == "text" and part.get("text"):
            return [AgentEvent("message", {"text": part["text"]})]
        if kind == "reasoning" and part.get("text"):
            return [AgentEvent("reasoning", {"text": part["text"]})]
        if kind == "tool_use":
            return self._tool(part)
        if kind == "step_finish":
            return self._usage(part)
        if kind == "error":
            return [AgentEvent("error", {"message": _error_message(obj.get("error"))})]
        return []

    def _usage(self, part: dict[str, Any]) -> list[AgentEvent]:
        tokens = part.get("tokens") or {}
        cache = tokens.get("cache") or {}
        cost = part.get("cost")
        if not self.priced and not cost:
            cost = None
        events = [
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
                    "cost_usd": cost,
                    "reason": part.get("reason"),
                },
            )
        ]
        if part.get("reason") == "length":
            events.append(
                AgentEvent("notice", {"message": "OpenCode: the model stopped at its output limit"})
            )
        return events

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


# Provider ids in OpenCode's configuration. The platform's OpenAI-compatible endpoint is a
# provider of its own on OpenCode's Chat Completions package: OpenCode's built-in "openai" provider
# speaks only the Responses API, and any id starting with "openai" retries a 404 (an unknown
# model) five times before it says so.
ANTHROPIC = "anthropic"
OPENAI_COMPATIBLE = "inspect-llm"
PROVIDER_NAMES = {"anthropic": ANTHROPIC, "openai": OPENAI_COMPATIBLE}
PROVIDER_NAMES.update({name: name for name in list(PROVIDER_NAMES.values())})
CONFIG_ENV = "OPENCODE_CONFIG_CONTENT"
# What OpenCode would fetch or install from the internet, and where it would read configuration
# the platform did not write (a repository's opencode.json and .opencode/, a stored login).
OFFLINE_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",  # models.dev: the bundled snapshot is used
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",  # the repository cannot pick the provider or URL
    "OPENCODE_AUTH_CONTENT": "{}",  # no stored logins (they can name a remote config)
}
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")  # OpenCode's own order: the first that exists


def provider_entry(provider: str, base_url: str, key_var: str) -> dict[str, Any]:
    options: dict[str, Any] = {"baseURL": base_url}
    if key_var:
        options["apiKey"] = "{env:" + key_var + "}"  # read from its process environment
    entry: dict[str, Any] = {"options": options, "models": {}}
    if provider == OPENAI_COMPATIBLE:
        entry.update(name="OpenAI-compatible (Inspect)", npm="@ai-sdk/openai-compatible")
    return entry


def process_env(route: GatewayRoute) -> dict[str, str]:
    """OpenCode's process environment: the turn's token (as each provider's key) and its whole
    configuration in OPENCODE_CONFIG_CONTENT — the providers the gateway has an upstream for,
    each at the gateway's route for its wire format (OpenCode's /v1 suffix), its key read from
    the environment, the default model; see `OpenCodeAgent.configure`. The provider keys stay
    in the gateway."""
    env: dict[str, str] = {}
    providers: dict[str, Any] = {}
    if accounts.anthropic_key():
        env["ANTHROPIC_API_KEY"] = route.token
        providers[ANTHROPIC] = provider_entry(
            ANTHROPIC, route.anthropic_base + "/v1", "ANTHROPIC_API_KEY"
        )
    if accounts.openai_key() or custom_openai_base():  # a local server needs no key upstream
        env["OPENAI_API_KEY"] = route.token
        providers[OPENAI_COMPATIBLE] = provider_entry(
            OPENAI_COMPATIBLE, route.openai_base, "OPENAI_API_KEY"
        )
    if not providers:
        raise AgentError(
            "the opencode agent needs INSPECT_LLM_API_KEY or ANTHROPIC_API_KEY to be set"
        )
    wanted = llm_provider()
    provider = (
        PROVIDER_NAMES[wanted] if PROVIDER_NAMES[wanted] in providers else next(iter(providers))
    )
    kind = "anthropic" if provider == ANTHROPIC else "openai"
    model = accounts.default_model() or DEFAULT_MODELS[kind]
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": providers,
        "enabled_providers": list(providers),
        "model": f"{provider}/{model}",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,  # the platform snapshots the workspace itself
    }
    return {**env, CONFIG_ENV: json.dumps(config), **OFFLINE_ENV}


def resolve_model(config: dict[str, Any], model: str) -> tuple[str, str]:
    """(provider id, model) for a session's model: `anthropic/…` or `openai/…` names the
    provider; a bare `claude-…` goes to Anthropic when it is configured, any other bare name
    to the OpenAI-compatible endpoint when that is; the configured default otherwise."""
    providers = config.get("provider") or {}
    default_provider, _, default_model = str(config.get("model") or "/").partition("/")
    if not model:
        return default_provider, default_model
    prefix, sep, rest = model.partition("/")
    if sep and prefix in PROVIDER_NAMES:
        provider = PROVIDER_NAMES[prefix]
        if provider not in providers:
            raise AgentError(
                f"the opencode agent has no {prefix} provider configured for the model {model!r}"
            )
        return provider, rest
    if model.startswith("claude") and ANTHROPIC in providers:
        return ANTHROPIC, model
    if OPENAI_COMPATIBLE in providers:
        return OPENAI_COMPATIBLE, model
    return default_provider, model


def model_cost(model: str) -> dict[str, float] | None:
    """The model's price as OpenCode's config declares it (USD per million tokens), from the
    platform's price table and INSPECT_LLM_PRICES; None if unknown."""
    try:
        extra = settings.LLM_PRICES
    except Exception:  # settings not configured: the built-in table alone
        extra = None
    price = price_of(model, extra)
    return None if price is None else {"input": price[0], "output": price[1]}


class OpenCodeAgent(CliAgent):
    name = "opencode"
    binary = "opencode"
    package = "opencode-ai"
    label = "OpenCode"

    def __init__(self, *, env: Mapping[str, str], model: str = "") -> None:
        super().__init__(env=env, model=model)
        self.config: dict[str, Any] = {}
        self.priced = False
        if CONFIG_ENV in self.process_env:
            self.configure(json.loads(self.process_env[CONFIG_ENV]))

    def configure(self, config: dict[str, Any]) -> None:
        """Declare the session's model under its provider, so OpenCode sends even a name it
        does not know to the API (which refuses it in its own words) instead of refusing it
        itself, and use it for everything (titles and summaries too)."""
        provider, model = resolve_model(config, self.model)
        entry = config["provider"][provider]
        declared: dict[str, Any] = {}
        cost = model_cost(model)
        if cost:
            declared["cost"] = cost
        # Without a price of ours, OpenCode's own (models.dev) may still give a cost; a cost of
        # 0 is then reported as unknown.
        self.priced = bool(cost)
        entry.setdefault("models", {})[model] = declared
        config["model"] = config["small_model"] = f"{provider}/{model}"
        self.model = model
        self.config = config
        self.process_env[CONFIG_ENV] = json.dumps(config)

    def state_env(self) -> dict[str, str]:
        # OpenCode keeps its sessions in XDG_DATA_HOME: in the state directory, the session's
        # snapshot carries them to the next turn.
        root = self.state_dir()
        return {
            "XDG_DATA_HOME": f"{root}/data",
            "XDG_CONFIG_HOME": f"{root}/config",
            "XDG_STATE_HOME": f"{root}/state",
            "XDG_CACHE_HOME": f"{root}/cache",
        }

    def attachment_paths(self, turn: Turn) -> list[str]:
        return [
            f"{self.state_dir()}/attachments/{n}-{_safe_name(image.name)}"
            for n, image in enumerate(turn.images, 1)
        ]

    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        """A turn; one whose earlier session OpenCode no longer has (its state did not survive
        the restore) says so and starts a new session instead."""
        if self.config and "cli_binary" not in turn.options:
            self._prepare(turn)
        if not turn.conversation.resume_id:
            yield from super().run(turn)
            return
        held: list[AgentEvent] = []
        for event in super().run(turn):
            if event.kind in ("error", "done"):
                held.append(event)  # decided once the CLI has exited: lost session or not
            else:
                yield event
        if not self._stopped.is_set() and LOST_SESSION in self._stderr_tail:
            yield AgentEvent(
                "notice",
                {
                    "message": "could not resume the earlier conversation: OpenCode has no "
                    f"session {turn.conversation.resume_id}; starting a new one"
                },
            )
            turn.conversation.resume_id = ""
            yield from super().run(turn)
            return
        yield from held

    def _prepare(self, turn: Turn) -> None:
        """Per turn: the repository's instructions file (OpenCode no longer looks for it, as
        project configuration is off), an empty read-only global config directory (nothing a
        previous turn left there is read), and the turn's images as files to attach."""
        present = {f.name for f in _listing(turn)}
        found = next((name for name in INSTRUCTION_FILES if name in present), None)
        config = json.loads(json.dumps(self.config))
        if turn.images:
            # A model OpenCode has no metadata for is taken as text-only and images would be
            # dropped; with images attached, it is asked (a text-only model refuses them).
            provider, _, model = config["model"].partition("/")
            config["provider"][provider]["models"][model].update(
                attachment=True, modalities={"input": ["text", "image"], "output": ["text"]}
            )
        if found:
            config["instructions"] = [f"{WORKSPACE}/{found}"]
        else:
            config.pop("instructions", None)
        self.process_env[CONFIG_ENV] = json.dumps(config)
        state = self.state_dir()
        # OpenCode installs its plugin package from npm into every config directory it can
        # write to: this one it cannot (and it holds nothing; the configuration is in the env).
        turn.sandbox.run(
            [
                "/bin/sh",
                "-c",
                'rm -rf "$1" "$2" && mkdir -p "$1/opencode" && chmod 555 "$1/opencode"',
                "sh",
                f"{state}/config",
                f"{state}/attachments",
            ],
            timeout=30,
        )
        for image, path in zip(turn.images, self.attachment_paths(turn), strict=True):
            turn.sandbox.write_file(path.removeprefix(WORKSPACE + "/"), image.data)

    def argv(self, turn: Turn) -> list[str]:
        # The prompt comes on stdin (OpenCode appends it to the message). --auto: the sandbox
        # is the permission boundary (a `run` rejects every permission request otherwise);
        # --thinking: reasoning is printed; a bare --title (last) skips the title request.
        argv = ["opencode", "run", "--format", "json", "--auto", "--thinking"]
        if self.config:
            argv += ["--model", self.config["model"]]
        elif self.model:
            argv += ["--model", self.model]
        if turn.conversation.resume_id:
            argv += ["--session", turn.conversation.resume_id]
        argv += [f"--file={path}" for path in self.attachment_paths(turn)]
        return [*argv, "--title"]

    def parser(self) -> StreamParser:
        return OpenCodeParser(model=self.model, priced=self.priced or not self.config)


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in name).strip("._")
    return cleaned[:80] or "image"


def _listing(turn: Turn) -> list:
    try:
        return turn.sandbox.list_files("")
    except (OSError, SandboxError):
        return []


def _error_message(error: Any) -> str:
    """OpenCode's error event in the API's own words, with the HTTP status when there is one."""
    if not isinstance(error, dict):
        return f"OpenCode: {error}"
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    text = data.get("message") or error.get("name") or "unknown error"
    status = data.get("statusCode")
    return f"OpenCode: {text}" + (f" (HTTP {status})" if status else "")
