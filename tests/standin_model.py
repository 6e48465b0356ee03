"""A deterministic stand-in model served over HTTP, speaking the providers' own wire formats.

It answers the Anthropic Messages API (``/v1/messages``, ``/v1/messages/count_tokens``), OpenAI
Chat Completions (``/v1/chat/completions``) and the OpenAI Responses API (``/v1/responses``),
streaming (SSE) and not, plus ``/v1/models``; any path prefix is accepted (with or without
``/v1``), so each CLI can be pointed at it the way it expects. Websocket upgrades are refused
(426 by default: Codex then falls back to HTTPS at once and quietly; with ``websocket_status=404``
it retries five times and reports "Falling back from WebSockets to HTTPS transport").

What it "decides" (so tests can assert outcomes):

* the request offers tools and the conversation ends with a user message: the newest user text is
  searched (anywhere, CLIs wrap prompts in context) for ``create <path> with <text>``
  (-> one shell call ``printf '%s\\n' '<text>' > <path>``), ``append <text> to <path>``
  (-> ``... >> <path>``) or ``undo what you just did`` (-> the inverse of its own latest
  create/append found in the EARLIER turns of the request: ``rm -f <path>`` or
  ``sed -i '$d' <path>``; with none found it says "I can find no earlier change in this
  conversation to undo." and calls nothing), or ``append <text> to the file you created``
  (-> an append to the path of its own latest create in the earlier turns; with none, "I can
  find no file created earlier in this conversation."), or ``run the command `<command>```
  (-> that command, verbatim: what a model talked into it would run). Anything else gets a plain
  text reply.
* the conversation ends with a tool result: a final text reply ("Done: created notes.txt").
* no tools offered (title and summary requests): a short text reply ("Stand-in title").

The shell tool is the first offered of ``Bash, bash, shell, shell_command, exec_command,
local_shell, run_command, exec`` (case-insensitive); its arguments are built from its JSON
schema (``command`` string or argv array, ``cmd``, required extras by name and type); a freeform
(``custom``) tool gets the command as its input; the Responses ``local_shell`` tool gets a
``local_shell_call``.

Unknown models are refused with each provider's 404, a wrong key with its 401. Every request is
recorded (``.requests``) for tests to assert on, e.g. that turn 2's request holds turn 1.

Use::

    with StandinModel(key="sk-test") as model:
        env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-test"}
        ...
        assert model.requests_with_tools()

By hand: ``python -m tests.standin_model --host 0.0.0.0 --port 8990 --key KEY`` prints the URLs
to configure.

How a sandboxed CLI reaches it. A sandbox has its own network namespace and never sees this
machine's loopback: ``open`` egress goes through slirp4netns with host loopback disabled, and an
nftables table refuses this machine's own and private addresses to the NAT/proxy group unless the
operator names an exception (``INSPECT_EGRESS_ALLOW_PRIVATE=name=ADDRESS[:PORTS]``,
``netns.EgressException``, accepted before the deny rules). What the tests use (checked from a
real sandbox in tests/agents/test_standin_model.py):

* ``allowlist`` egress through the sandbox's proxy: ``route = standin.sandbox_route()`` gives
  ``egress_hosts`` (a name, ``model.test``, that only the proxy resolves, to this server's
  address) and ``egress_exceptions`` (that address and port) for ``LocalBackend``, plus
  ``NetworkPolicy("allowlist", (route.name,))``. The sandbox sets ``HTTP_PROXY`` and
  ``HTTPS_PROXY`` to its proxy; Claude Code, Codex and OpenCode all honour them and send absolute
  ``POST http://model.test:PORT/...`` requests, which the proxy relays. The base URL must be the
  name (``NO_PROXY`` holds 127.0.0.1). Codex's websocket attempt goes as ``CONNECT``, which the
  proxy refuses without TLS: configure Codex with a custom ``model_provider`` (no websocket).
* ``open`` egress: serve on a non-loopback address of this machine and name it in
  ``INSPECT_EGRESS_ALLOW_PRIVATE`` (e.g. ``standin=10.0.0.5:8990``); the base URL is then
  ``http://10.0.0.5:8990``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_MODELS: tuple[str, ...] = (
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "gpt-4.1",
    "gpt-5-codex",
    "gpt-5",
)
# Dated variants of the default models (what CLIs send for their small/fast model).
DEFAULT_PREFIXES: tuple[str, ...] = ("claude-sonnet-4-5-", "claude-haiku-4-5-")

SHELL_TOOL_NAMES = (
    "bash",
    "shell",
    "shell_command",
    "exec_command",
    "local_shell",
    "run_command",
    "exec",
)
NO_UNDO = "I can find no earlier change in this conversation to undo."
NO_INSTRUCTION = "Stand-in model: I found no instruction I know in the prompt."
TITLE = "Stand-in title"

CREATE_RE = re.compile(r"\bcreate\s+(?P<path>[\w./-]+)\s+with\s+(?P<text>[^\n]+)", re.I)
APPEND_RE = re.compile(r"\bappend\s+(?P<text>[^\n]+?)\s+to\s+(?P<path>[\w./-]*\w)", re.I)
UNDO_RE = re.compile(r"\bundo what you just did\b", re.I)
# Any command, verbatim (for attack tests: what a model talked into it would run).
RUN_RE = re.compile(r"\brun the command `(?P<command>[^`\n]+)`", re.I)
# A follow-up that names no file: which one is known only from the earlier turns.
APPEND_EARLIER_RE = re.compile(
    r"\bappend\s+(?P<text>[^\n]+?)\s+to\s+the\s+file\s+you\s+created\b", re.I
)
NO_EARLIER_FILE = "I can find no file created earlier in this conversation."
# The commands it issues itself, recognised again in a later turn's history.
OWN_WRITE_RE = re.compile(r"printf '%s\\n' (?P<text>'(?:[^']|'\\'')*') (?P<op>>>?) (?P<path>\S+)")
OWN_RM_RE = re.compile(r"^rm (?:-f )?(?P<path>\S+)$")
# How a failed command shows in a tool result (Codex: "Process exited with code 1", a refused
# command: "... rejected: ..."; Claude Code sets is_error).
FAILED_RE = re.compile(r"exited with code [1-9]|exit code:? [1-9]|\bfailed\b|\brejected\b", re.I)
OWN_SED_RE = re.compile(r"^sed -i '\$d' (?P<path>\S+)$")

# The command in the JavaScript it sends Codex's code-mode ``exec`` tool.
JS_CMD_RE = re.compile(r'tools\.exec_command\(\{cmd: ("(?:[^"\\]|\\.)*")')

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids):04d}{secrets.token_hex(8)}"


def _sq(text: str) -> str:
    """Single-quote for sh (always quoted, as the brief's commands show)."""
    return "'" + text.replace("'", "'\\''") + "'"


def _clean_text(text: str) -> str:
    text = text.strip()
    # Prompts often quote the text or end the sentence with a full stop; OpenCode's `run`
    # quotes the whole prompt, leaving a stray closing quote at the end of the line.
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`":
        return text[1:-1]
    return text.rstrip("'\"`").rstrip(".")


def _tokens(n_chars: int) -> int:
    return max(1, n_chars // 4)


# --------------------------------------------------------------------------------------------
# Conversation model (API-neutral)
# --------------------------------------------------------------------------------------------


@dataclass
class Tool:
    name: str
    kind: str  # "function" | "custom" | "local_shell"
    schema: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    @property
    def runs_javascript(self) -> bool:
        """Codex's code mode: one freeform ``exec`` tool taking JavaScript that calls the
        nested tools (``await tools.exec_command({cmd})``)."""
        return self.kind == "custom" and "tools.exec_command" in self.description


@dataclass
class Conversation:
    """What the decision needs from a request, whatever its API."""

    tools: list[Tool]
    last: str  # "user" | "tool_result" | "assistant" | "none"
    user_text: str  # the newest user message's text
    calls: list[str]  # commands of earlier assistant tool calls, oldest first
    result: str = ""  # the last tool result's text
    result_error: bool = False


@dataclass
class Decision:
    text: str | None = None
    tool: Tool | None = None
    arguments: Any = None  # dict for function tools, str for custom, argv for local_shell
    command: str = ""


def command_of(args: Any) -> str:
    """The shell command in a tool call's arguments, whichever form they take."""
    if isinstance(args, str) and (m := JS_CMD_RE.search(args)):
        return json.loads(m[1])
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args  # a freeform tool's input
    if isinstance(args, list):
        return str(args[-1]) if args else ""
    if isinstance(args, dict):
        for key in ("command", "cmd", "input", "script"):
            value = args.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and value:
                return str(value[-1])
    return ""


def pick_tool(tools: Iterable[Tool]) -> Tool | None:
    by_name = {t.name.lower(): t for t in tools}
    for name in SHELL_TOOL_NAMES:
        if name in by_name:
            return by_name[name]
    return None


def build_arguments(tool: Tool, command: str) -> Any:
    if tool.runs_javascript:
        return (
            f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});\n"
            "text(r.output ?? JSON.stringify(r));\n"
        )
    if tool.kind == "custom":
        return command
    if tool.kind == "local_shell":
        return ["bash", "-lc", command]
    schema = tool.schema or {}
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    args: dict[str, Any] = {}
    if not props:
        return {"command": command}
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        type_ = prop.get("type")
        if isinstance(type_, list):
            type_ = next((t for t in type_ if t != "null"), None)
        if name in ("command", "cmd"):
            args[name] = ["bash", "-lc", command] if type_ == "array" else command
        elif name in required:
            args[name] = _filler(name, prop, type_)
    if "command" not in args and "cmd" not in args:
        args["command"] = command
    return args


def _filler(name: str, prop: dict[str, Any], type_: Any) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    lowered = name.lower()
    if lowered in ("description", "justification", "reason", "summary"):
        return "run the change"
    if lowered in ("workdir", "cwd", "directory", "working_directory", "dir", "path"):
        return "."
    if "timeout" in lowered:
        return 60000
    return {
        "string": "",
        "integer": 0,
        "number": 0,
        "boolean": False,
        "array": [],
        "object": {},
    }.get(type_, "")


def decide(conv: Conversation) -> Decision:
    if not conv.tools:
        return Decision(text=TITLE)
    if conv.last == "tool_result":
        if conv.result_error or FAILED_RE.search(conv.result):
            first = conv.result.strip().splitlines()[0] if conv.result.strip() else "no output"
            return Decision(text=f"The command failed: {first[:300]}")
        return Decision(text="Done: " + describe(conv.calls[-1] if conv.calls else ""))
    if conv.last != "user":
        return Decision(text=NO_INSTRUCTION)
    text = conv.user_text
    command = ""
    if m := RUN_RE.search(text):
        command = m["command"]
    elif UNDO_RE.search(text):
        command = undo_command(conv.calls)
        if not command:
            return Decision(text=NO_UNDO)
    elif m := APPEND_EARLIER_RE.search(text):
        path = created_path(conv.calls)
        if not path:
            return Decision(text=NO_EARLIER_FILE)
        command = f"printf '%s\\n' {_sq(_clean_text(m['text']))} >> {path}"
    elif m := CREATE_RE.search(text):
        command = f"printf '%s\\n' {_sq(_clean_text(m['text']))} > {shlex.quote(m['path'])}"
    elif m := APPEND_RE.search(text):
        command = f"printf '%s\\n' {_sq(_clean_text(m['text']))} >> {shlex.quote(m['path'])}"
    else:
        return Decision(text=NO_INSTRUCTION)
    tool = pick_tool(conv.tools)
    if tool is None:
        names = ", ".join(t.name for t in conv.tools)
        return Decision(text=f"I have no shell tool among {names} to run: {command}")
    return Decision(tool=tool, arguments=build_arguments(tool, command), command=command)


def undo_command(calls: list[str]) -> str:
    """The inverse of its own latest create/append still in effect in ``calls``."""
    stack: list[tuple[str, str]] = []  # (op, path)
    for call in calls:
        call = call.strip()
        if m := OWN_WRITE_RE.search(call):
            stack.append((m["op"], m["path"]))
        elif (m := OWN_RM_RE.match(call)) or (m := OWN_SED_RE.match(call)):
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][1] == m["path"]:
                    del stack[i]
                    break
    if not stack:
        return ""
    op, path = stack[-1]
    # Plain rm: Codex refuses "rm -f style commands" even with its sandbox off.
    return f"rm {path}" if op == ">" else f"sed -i '$d' {path}"


def created_path(calls: list[str]) -> str:
    """The file its own latest create in ``calls`` made ('' if none)."""
    paths = [m["path"] for call in calls if (m := OWN_WRITE_RE.search(call)) and m["op"] == ">"]
    return paths[-1] if paths else ""


def describe(command: str) -> str:
    if m := OWN_WRITE_RE.search(command):
        return ("created " if m["op"] == ">" else "appended a line to ") + m["path"]
    if m := OWN_RM_RE.match(command.strip()):
        return f"removed {m['path']} (undone)"
    if m := OWN_SED_RE.match(command.strip()):
        return f"removed the last line of {m['path']} (undone)"
    return f"ran {command}" if command else "nothing to report"


# --------------------------------------------------------------------------------------------
# Per-API parsing
# --------------------------------------------------------------------------------------------


def _text_of(content: Any, types: tuple[str, ...] = ("text", "input_text")) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in types
        )
    return ""


def anthropic_conversation(body: dict[str, Any]) -> Conversation:
    tools = [
        Tool(t["name"], "function", t.get("input_schema") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict) and "name" in t
    ]
    calls: list[str] = []
    last, user_text, result, error = "none", "", "", False
    for msg in body.get("messages") or []:
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if msg.get("role") == "assistant":
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    calls.append(command_of(b.get("input")))
            last = "assistant"
        elif msg.get("role") == "user":
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                last = "tool_result"
                result = _text_of(results[-1].get("content"))
                error = bool(results[-1].get("is_error"))
            else:
                last, user_text = "user", _text_of(content)
    return Conversation(tools, last, user_text, calls, result, error)


def chat_conversation(body: dict[str, Any]) -> Conversation:
    tools = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and "name" in fn:
            tools.append(Tool(fn["name"], "function", fn.get("parameters") or {}))
    calls: list[str] = []
    last, user_text, result = "none", "", ""
    for msg in body.get("messages") or []:
        role = msg.get("role")
        if role == "assistant":
            for call in msg.get("tool_calls") or []:
                calls.append(command_of((call.get("function") or {}).get("arguments")))
            last = "assistant"
        elif role == "tool":
            last, result = "tool_result", _text_of(msg.get("content"))
        elif role == "user":
            last, user_text = "user", _text_of(msg.get("content"))
    return Conversation(tools, last, user_text, calls, result)


def responses_tools(body: dict[str, Any]) -> list[Tool]:
    tools = []
    specs = list(body.get("tools") or [])
    # Codex may offer tools in an input item of their own rather than in ``tools``.
    for item in _input_items(body):
        if item.get("type") == "additional_tools":
            specs += item.get("tools") or []
    while specs:
        t = specs.pop(0)
        if not isinstance(t, dict):
            continue
        kind = t.get("type", "function")
        if kind == "namespace":  # a group of tools (Codex: "functions", "multi_agent_v1")
            specs += t.get("tools") or []
        elif kind == "function" and "name" in t:
            tools.append(Tool(t["name"], "function", t.get("parameters") or {}))
        elif kind == "custom" and "name" in t:
            tools.append(Tool(t["name"], "custom", description=str(t.get("description") or "")))
        elif kind == "local_shell":
            tools.append(Tool("local_shell", "local_shell"))
    return tools


def _input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    if isinstance(items, str):
        return [{"type": "message", "role": "user", "content": items}]
    return [i for i in items or [] if isinstance(i, dict)]


def responses_conversation(body: dict[str, Any], history: list[dict[str, Any]]) -> Conversation:
    calls: list[str] = []
    last, user_text, result = "none", "", ""
    for item in [*history, *_input_items(body)]:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role == "user":
                last, user_text = "user", _text_of(item.get("content"))
            elif role == "assistant":
                last = "assistant"
        elif kind == "function_call":
            calls.append(command_of(item.get("arguments")))
            last = "assistant"
        elif kind == "custom_tool_call":
            calls.append(command_of(str(item.get("input") or "")))
            last = "assistant"
        elif kind == "local_shell_call":
            calls.append(command_of((item.get("action") or {}).get("command")))
            last = "assistant"
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            last, result = "tool_result", _text_of(item.get("output"), ("input_text", "text"))
    return Conversation(responses_tools(body), last, user_text, calls, result)


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    api: str  # "anthropic" | "chat" | "responses" | "count_tokens" | "models" | "other"
    headers: dict[str, str]
    body: Any
    at: float
    status: int = 0
    reply: dict[str, Any] = field(default_factory=dict)  # what it decided (text/tool/command)

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def has_tools(self) -> bool:
        if not isinstance(self.body, dict):
            return False
        if self.body.get("tools"):
            return True
        return any(i.get("type") == "additional_tools" for i in _input_items(self.body))

    def text(self) -> str:
        """The whole body as text, for "holds turn 1's prompt" assertions."""
        return json.dumps(self.body)


@dataclass(frozen=True)
class SandboxRoute:
    """``LocalBackend(root, egress_hosts=r.egress_hosts, egress_exceptions=r.egress_exceptions)``
    and ``NetworkPolicy("allowlist", (r.name,))``; the CLI in the sandbox then uses ``r.url``
    (``r.url + "/v1"`` for OpenAI clients) through the HTTP_PROXY the sandbox sets."""

    name: str
    url: str
    egress_hosts: dict[str, str]
    egress_exceptions: tuple[Any, ...]


class StandinModel:
    """The stand-in server. ``key=None`` accepts any key; ``models``/``prefixes`` the accepted
    model names (exact, or starting with a prefix)."""

    def __init__(
        self,
        *,
        key: str | None = "sk-standin",
        models: Iterable[str] = DEFAULT_MODELS,
        prefixes: Iterable[str] = DEFAULT_PREFIXES,
        host: str = "127.0.0.1",
        port: int = 0,
        websocket_status: int = 426,
    ) -> None:
        self.key = key
        self.websocket_status = websocket_status
        self.models = list(models)
        self.prefixes = tuple(prefixes)
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []
        self._responses: dict[str, list[dict[str, Any]]] = {}  # id -> input + output items
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> StandinModel:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer((self.host, self.port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StandinModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL without ``/v1`` (what Claude Code wants); add ``/v1`` for OpenAI clients."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    # -- reaching it from a sandbox ----------------------------------------------------------
    def sandbox_route(self, name: str = "model.test") -> SandboxRoute:
        """How an ``allowlist`` sandbox of the local backend reaches this server through its
        egress proxy: a host name only the proxy resolves (to this server's address) and an
        operator exception for exactly this address and port."""
        from snapshots.sandbox.netns import parse_exceptions

        address = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return SandboxRoute(
            name=name,
            url=f"http://{name}:{self.port}",
            egress_hosts={name: address},
            egress_exceptions=parse_exceptions(f"standin={address}:{self.port}"),
        )

    # -- recording --------------------------------------------------------------------------
    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def model_requests(self) -> list[Recorded]:
        """Requests to a generation endpoint (messages, chat, responses)."""
        return [r for r in self.requests if r.api in ("anthropic", "chat", "responses")]

    def requests_with_tools(self) -> list[Recorded]:
        return [r for r in self.model_requests() if r.has_tools]

    def tool_calls(self) -> list[str]:
        """Every command it asked a client to run, in order."""
        return [r.reply["command"] for r in self.model_requests() if r.reply.get("command")]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def wait_for(self, predicate: Callable[[Recorded], bool], timeout: float = 10) -> Recorded:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in self.requests:
                if predicate(r):
                    return r
            time.sleep(0.05)
        raise TimeoutError("no matching request reached the stand-in model")

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self._requests.append(rec)

    # -- policy -----------------------------------------------------------------------------
    def accepts_model(self, name: str) -> bool:
        return name in self.models or any(name.startswith(p) for p in self.prefixes)

    def key_ok(self, headers: dict[str, str]) -> bool:
        if self.key is None:
            return True
        given = headers.get("x-api-key") or ""
        auth = headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        return secrets.compare_digest(given.encode(), self.key.encode())

    def _remember_response(self, rid: str, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self._responses[rid] = items

    def _history(self, previous_id: str | None) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._responses.get(previous_id or "", []))


# --------------------------------------------------------------------------------------------
# Wire formats
# --------------------------------------------------------------------------------------------


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def openai_error(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _masked(key: str) -> str:
    return (key[:3] + "*" * 4 + key[-4:]) if len(key) > 8 else "****"


class _Reply:
    """One answer: a JSON body, or a list of SSE chunks."""

    def __init__(self, status: int, body: Any = None, events: list[bytes] | None = None):
        self.status, self.body, self.events = status, body, events


def anthropic_reply(model: str, d: Decision, input_tokens: int, stream: bool) -> _Reply:
    content: list[dict[str, Any]] = []
    if d.text is not None:
        content.append({"type": "text", "text": d.text})
    if d.tool is not None:
        content.append(
            {"type": "tool_use", "id": _id("toolu_"), "name": d.tool.name, "input": d.arguments}
        )
    output_tokens = _tokens(len(json.dumps(content)))
    stop = "tool_use" if d.tool else "end_turn"
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }
    message = {
        "id": _id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return _Reply(200, message)
    start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(content):
        if block["type"] == "text":
            empty = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _halves(block["text"])]
        else:
            empty = dict(block, input={})
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(raw)]
        events.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": empty},
            )
        )
        if i == 0:
            events.append(_sse("ping", {"type": "ping"}))
        for delta in deltas:
            events.append(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                )
            )
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return _Reply(200, events=events)


def _halves(text: str) -> list[str]:
    """Split in two so clients must really join deltas."""
    if len(text) < 2:
        return [text]
    mid = len(text) // 2
    return [text[:mid], text[mid:]]


def chat_reply(model: str, d: Decision, body: dict[str, Any], input_tokens: int) -> _Reply:
    cid, created = _id("chatcmpl-"), int(time.time())
    calls = []
    if d.tool is not None:
        calls.append(
            {
                "id": _id("call_"),
                "type": "function",
                "function": {"name": d.tool.name, "arguments": json.dumps(d.arguments)},
            }
        )
    output_tokens = _tokens(len(json.dumps(calls)) + len(d.text or ""))
    usage = {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    finish = "tool_calls" if calls else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": d.text,
            "refusal": None,
            "annotations": [],
        }
        if calls:
            message["tool_calls"] = calls
        return _Reply(
            200,
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                ],
                "usage": usage,
                "system_fingerprint": None,
            },
        )

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return _sse(
            None,
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "logprobs": None,
                        "finish_reason": finish_reason,
                    }
                ],
            },
        )

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for part in _halves(d.text or "") if d.text else []:
        events.append(chunk({"content": part}))
    for i, call in enumerate(calls):
        head = {"index": i, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        events.append(chunk({"tool_calls": [head]}))
        for part in _halves(call["function"]["arguments"]):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
    events.append(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append(
            _sse(
                None,
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "system_fingerprint": None,
                    "choices": [],
                    "usage": usage,
                },
            )
        )
    events.append(_sse(None, "[DONE]"))
    return _Reply(200, events=events)


def responses_reply(
    model: str, d: Decision, body: dict[str, Any], input_tokens: int
) -> tuple[_Reply, str, list[dict[str, Any]]]:
    rid = _id("resp_")
    items: list[dict[str, Any]] = []
    if d.text is not None:
        items.append(
            {
                "id": _id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": d.text, "annotations": [], "logprobs": []}
                ],
            }
        )
    if d.tool is not None and d.tool.kind == "custom":
        items.append(
            {
                "id": _id("ctc_"),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": _id("call_"),
                "name": d.tool.name,
                "input": d.arguments,
            }
        )
    elif d.tool is not None and d.tool.kind == "local_shell":
        items.append(
            {
                "id": _id("lsh_"),
                "type": "local_shell_call",
                "status": "completed",
                "call_id": _id("call_"),
                "action": {
                    "type": "exec",
                    "command": d.arguments,
                    "env": {},
                    "timeout_ms": None,
                    "user": None,
                    "working_directory": None,
                },
            }
        )
    elif d.tool is not None:
        items.append(
            {
                "id": _id("fc_"),
                "type": "function_call",
                "status": "completed",
                "arguments": json.dumps(d.arguments),
                "call_id": _id("call_"),
                "name": d.tool.name,
            }
        )
    output_tokens = _tokens(len(json.dumps(items)))
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }
    response: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": items,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }
    if not body.get("stream"):
        return _Reply(200, response), rid, items
    seq = itertools.count(0)
    events: list[bytes] = []

    def emit(type_: str, **fields: Any) -> None:
        events.append(_sse(type_, {"type": type_, "sequence_number": next(seq), **fields}))

    pending = dict(response, status="in_progress", output=[], usage=None)
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(items):
        iid = item["id"]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", content=[]),
            )
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit(
                "response.content_part.added",
                item_id=iid,
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in _halves(text):
                emit(
                    "response.output_text.delta",
                    item_id=iid,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=iid,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=iid,
                output_index=index,
                content_index=0,
                part=dict(part, text=text),
            )
        elif item["type"] == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", arguments=""),
            )
            for piece in _halves(item["arguments"]):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=iid,
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=iid,
                output_index=index,
                arguments=item["arguments"],
            )
        elif item["type"] == "custom_tool_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", input=""),
            )
            for piece in _halves(item["input"]):
                emit(
                    "response.custom_tool_call_input.delta",
                    item_id=iid,
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.custom_tool_call_input.done",
                item_id=iid,
                output_index=index,
                input=item["input"],
            )
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return _Reply(200, events=events), rid, items


def _models_body(model: StandinModel, anthropic: bool) -> dict[str, Any]:
    if anthropic:
        data = [
            {
                "type": "model",
                "id": m,
                "display_name": m,
                "created_at": "2025-09-29T00:00:00Z",
            }
            for m in model.models
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    return {
        "object": "list",
        "data": [
            {"id": m, "object": "model", "created": 1_750_000_000, "owned_by": "standin"}
            for m in model.models
        ],
    }


def _route(path: str) -> str:
    path = path.split("?", 1)[0].rstrip("/")
    for suffix, api in (
        ("/messages/count_tokens", "count_tokens"),
        ("/messages", "anthropic"),
        ("/chat/completions", "chat"),
        ("/responses", "responses"),
        ("/models", "models"),
    ):
        if path.endswith(suffix) or path == suffix.lstrip("/"):
            return api
    if "/models/" in path:
        return "model"
    return "other"


def _make_handler(standin: StandinModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._handle()

        def do_POST(self) -> None:  # noqa: N802
            self._handle()

        def do_HEAD(self) -> None:  # noqa: N802
            self._handle()

        def _handle(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            raw = self._read_body(headers)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            api = _route(self.path)
            rec = Recorded(self.command, self.path, api, headers, body, time.time())
            try:
                reply = self._answer(rec, api, headers, body, len(raw))
            except Exception as exc:  # a bug here must show as the provider's 500, not a hang
                why = f"stand-in model error: {exc!r}"
                reply = _Reply(
                    500,
                    anthropic_error("api_error", why)
                    if api in ("anthropic", "count_tokens")
                    else openai_error(why, "server_error", None),
                )
            rec.status = reply.status
            standin._record(rec)
            self._send(reply, anthropic=api in ("anthropic", "count_tokens"))

        def _read_body(self, headers: dict[str, str]) -> bytes:
            if headers.get("transfer-encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(headers.get("content-length") or 0))

        def _answer(
            self, rec: Recorded, api: str, headers: dict[str, str], body: Any, size: int
        ) -> _Reply:
            is_anthropic = api in ("anthropic", "count_tokens") or (
                api in ("models", "model")
                and ("anthropic-version" in headers or "x-api-key" in headers)
            )
            if headers.get("upgrade", "").lower() == "websocket":
                # No websockets here: clients fall back to plain HTTPS requests.
                return _Reply(
                    standin.websocket_status,
                    openai_error("websockets are not supported", "invalid_request_error", None),
                )
            if not standin.key_ok(headers):
                if is_anthropic:
                    return _Reply(401, anthropic_error("authentication_error", "invalid x-api-key"))
                given = (headers.get("authorization") or "")[7:].strip()
                message = (
                    f"Incorrect API key provided: {_masked(given)}. You can find your API key "
                    "at https://platform.openai.com/account/api-keys."
                    if given
                    else "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
                )
                return _Reply(
                    401, openai_error(message, "invalid_request_error", "invalid_api_key")
                )
            if api == "models" and self.command in ("GET", "HEAD"):
                return _Reply(200, _models_body(standin, is_anthropic))
            if api == "model" and self.command == "GET":
                name = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
                if not standin.accepts_model(name):
                    return self._refuse(name, is_anthropic)
                if is_anthropic:
                    return _Reply(
                        200,
                        {
                            "type": "model",
                            "id": name,
                            "display_name": name,
                            "created_at": "2025-09-29T00:00:00Z",
                        },
                    )
                return _Reply(
                    200,
                    {
                        "id": name,
                        "object": "model",
                        "created": 1_750_000_000,
                        "owned_by": "standin",
                    },
                )
            if self.command != "POST" or api in ("other", "models", "model"):
                if is_anthropic:
                    return _Reply(404, anthropic_error("not_found_error", "Not Found"))
                return _Reply(
                    404,
                    openai_error(
                        f"Invalid URL ({self.command} {self.path})", "invalid_request_error", None
                    ),
                )
            if not isinstance(body, dict):
                if is_anthropic:
                    return _Reply(
                        400, anthropic_error("invalid_request_error", "invalid JSON body")
                    )
                return _Reply(
                    400,
                    openai_error(
                        "We could not parse the JSON body of your request.",
                        "invalid_request_error",
                        None,
                    ),
                )
            name = str(body.get("model") or "")
            if not standin.accepts_model(name):
                return self._refuse(name, is_anthropic)
            input_tokens = _tokens(size)
            if api == "count_tokens":
                return _Reply(200, {"input_tokens": input_tokens})
            if api == "anthropic":
                conv = anthropic_conversation(body)
                d = decide(conv)
                rec.reply = _summary(d)
                return anthropic_reply(name, d, input_tokens, bool(body.get("stream")))
            if api == "chat":
                d = decide(chat_conversation(body))
                rec.reply = _summary(d)
                return chat_reply(name, d, body, input_tokens)
            history = standin._history(body.get("previous_response_id"))
            d = decide(responses_conversation(body, history))
            rec.reply = _summary(d)
            reply, rid, items = responses_reply(name, d, body, input_tokens)
            standin._remember_response(rid, [*history, *_input_items(body), *items])
            return reply

        def _refuse(self, name: str, anthropic: bool) -> _Reply:
            if anthropic:
                return _Reply(404, anthropic_error("not_found_error", f"model: {name}"))
            return _Reply(
                404,
                openai_error(
                    f"The model `{name}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    "model_not_found",
                ),
            )

        def _send(self, reply: _Reply, anthropic: bool) -> None:
            request_id = _id("req_")
            try:
                self.send_response(reply.status)
                if anthropic:
                    self.send_header("request-id", request_id)
                else:
                    self.send_header("x-request-id", request_id)
                if reply.events is None:
                    data = json.dumps(reply.body).encode()
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                    return
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for event in reply.events:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away

    return Handler


def _summary(d: Decision) -> dict[str, Any]:
    if d.tool is None:
        return {"text": d.text}
    return {"tool": d.tool.name, "arguments": d.arguments, "command": d.command}


def iter_sse(raw: bytes) -> Iterator[tuple[str | None, str]]:
    """(event, data) pairs of an SSE body (for tests)."""
    for block in raw.decode().split("\n\n"):
        event, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            yield event, "\n".join(data)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8990)
    parser.add_argument("--key", default="sk-standin", help="the API key it requires")
    parser.add_argument("--model", action="append", help="an accepted model (repeatable)")
    parser.add_argument("--prefix", action="append", help="an accepted model prefix")
    args = parser.parse_args(argv)
    standin = StandinModel(
        key=args.key,
        models=args.model or DEFAULT_MODELS,
        prefixes=args.prefix or DEFAULT_PREFIXES,
        host=args.host,
        port=args.port,
    ).start()
    base = f"http://{args.host}:{standin.port}"
    key = args.key
    provider = {"options": {"baseURL": f"{base}/v1", "apiKey": key}}
    lines = [
        f"stand-in model on {base} (key {key!r}); models: {', '.join(standin.models)}",
        f"  Claude Code: ANTHROPIC_BASE_URL={base} ANTHROPIC_API_KEY={key}"
        " claude -p --model claude-sonnet-4-5 ...",
        f"  Codex: OPENAI_API_KEY={key} codex exec -m gpt-5-codex -c model_provider=standin"
        " -c model_providers.standin.name=standin"
        f" -c model_providers.standin.base_url={base}/v1"
        " -c model_providers.standin.env_key=OPENAI_API_KEY"
        " -c model_providers.standin.wire_api=responses ...",
        "  OpenCode: OPENCODE_CONFIG_CONTENT='"
        + json.dumps({"provider": {"anthropic": provider}, "model": "anthropic/claude-sonnet-4-5"})
        + "' opencode run ...",
        f"  OpenAI Chat Completions / Responses clients: base URL {base}/v1",
        "  (a sandbox cannot reach 127.0.0.1: see this module's docstring)",
    ]
    print("\n".join(lines), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
