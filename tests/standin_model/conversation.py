"""What the stand-in model decides, whatever the API: the conversation a request holds, and the
one shell command (or text) it answers with (see the package docstring)."""

from __future__ import annotations

import itertools
import json
import re
import secrets
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
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


def new_id(prefix: str) -> str:
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


def estimate_tokens(n_chars: int) -> int:
    return max(1, n_chars // 4)


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


def text_of(content: Any, types: tuple[str, ...] = ("text", "input_text")) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in types
        )
    return ""


def decision_summary(d: Decision) -> dict[str, Any]:
    if d.tool is None:
        return {"text": d.text}
    return {"tool": d.tool.name, "arguments": d.arguments, "command": d.command}
