"""The built-in agent's tools. Each one acts through the sandbox API (file API or an exec inside
the sandbox); nothing runs on the worker host.

A tool is a generator: it may yield live AgentEvents (a command's output lines, "waiting for
the sync") and returns a ToolOutcome, the text the model reads next.
"""

from __future__ import annotations

import difflib
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from inspect_web.text import shorten
from sessions.agents.base import AgentError, AgentEvent, ApprovalGate, ChildSessions
from snapshots.sandbox import (
    ExecHandle,
    PathEscapesWorkspace,
    Sandbox,
    SandboxError,
    SandboxGone,
)

MODEL_OUTPUT_CHARS = 16_000  # what one tool result may put in front of the model
READ_MAX_LINES = 2000
LIST_MAX_ENTRIES = 400
SEARCH_MAX_LINES = 200
SEARCH_TIMEOUT = 60.0
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv"}


class ToolInputError(Exception):
    """The model called a tool wrongly (missing argument, wrong type); it is told why."""


class Stopped(Exception):
    """The turn was stopped while a tool waited or ran."""


@dataclass
class ToolOutcome:
    output: str
    ok: bool = True
    edits: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    data: dict[str, Any] = field(default_factory=dict)  # extra fields for the tool_result event


ToolRun = Generator[AgentEvent, None, ToolOutcome]


def _spec(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


_PATH = {"type": "string", "description": "Path relative to the repository root."}

SPECS = [
    _spec(
        "list_files",
        "List a directory of the repository (skips .git, node_modules, caches).",
        {
            "path": {**_PATH, "description": "Directory, relative to the root; default '.'."},
            "depth": {"type": "integer", "description": "How deep to recurse, 1-4; default 1."},
        },
        [],
    ),
    _spec(
        "read_file",
        "Read a text file, with line numbers. Use start_line/end_line for long files.",
        {
            "path": _PATH,
            "start_line": {"type": "integer", "description": "First line (1-based)."},
            "end_line": {"type": "integer", "description": "Last line, inclusive."},
        },
        ["path"],
    ),
    _spec(
        "search",
        "Search file contents with a regular expression (grep -E), recursively.",
        {
            "pattern": {"type": "string", "description": "Extended regular expression."},
            "path": {**_PATH, "description": "File or directory to search; default '.'."},
            "glob": {"type": "string", "description": "Only files matching, e.g. '*.py'."},
            "ignore_case": {"type": "boolean"},
        },
        ["pattern"],
    ),
    _spec(
        "write_file",
        "Create or replace a whole file.",
        {"path": _PATH, "content": {"type": "string", "description": "The complete new text."}},
        ["path", "content"],
    ),
    _spec(
        "edit_file",
        "Replace an exact string in a file. old_string must appear exactly once unless "
        "replace_all is true; include enough surrounding lines to make it unique.",
        {
            "path": _PATH,
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean"},
        },
        ["path", "old_string", "new_string"],
    ),
    _spec(
        "run_command",
        "Run a shell command (sh -c) in the repository root and return its exit code and "
        "output. Use it to run tests, linters and builds.",
        {
            "command": {"type": "string"},
            "timeout_seconds": {"type": "integer", "description": "Default 120."},
        },
        ["command"],
    ),
    _spec(
        "finish",
        "End the turn: the work is done (or cannot be done). Summarise what changed and why.",
        {"summary": {"type": "string"}},
        ["summary"],
    ),
]

CHILD_SPECS = [
    _spec(
        "spawn_session",
        "Start a separate agent session (its own sandbox and pull request) on a repository, "
        "for an independent part of a large task. Returns the new session's id.",
        {
            "repository": {"type": "string", "description": "Repository name."},
            "prompt": {"type": "string", "description": "The complete task for that session."},
        },
        ["repository", "prompt"],
    ),
    _spec(
        "session_status",
        "The state, diff summary and last message of a session this one started.",
        {"session_id": {"type": "integer"}},
        ["session_id"],
    ),
]

WRITING_TOOLS = {"write_file", "edit_file", "run_command"}


def _arg(args: Mapping[str, Any], name: str, kind: type, default: Any = ...) -> Any:
    if name not in args or args[name] is None:
        if default is ...:
            raise ToolInputError(f"missing required argument {name!r}")
        return default
    value = args[name]
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if kind is bool and isinstance(value, str):
        value = value.strip().lower() in ("true", "1", "yes")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolInputError(f"argument {name!r} must be a {kind.__name__}")
    return value


def head_tail(text: str, limit: int = MODEL_OUTPUT_CHARS) -> str:
    return shorten(text, limit)


def line_counts(before: str, after: str) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


class Toolbox:
    """The tools of one turn, bound to its sandbox.

    `sync_done`: writes wait for it (see Turn.sync_done). `deadline`: a monotonic time no
    command may outlive. `kill()` (from another thread) ends the running command at once.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        stopped: threading.Event,
        sync_done: threading.Event | None = None,
        env: Mapping[str, str] | None = None,
        command_timeout: float = 600.0,
        deadline: float | None = None,
        children: ChildSessions | None = None,
        approvals: ApprovalGate | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.approvals = approvals
        self.stopped = stopped
        self.sync_done = sync_done
        self.env = dict(env or {})
        self.command_timeout = command_timeout
        self.deadline = deadline
        self.children = children
        self._handle: ExecHandle | None = None
        self._lock = threading.Lock()
        self.touched = False  # the workspace may have changed this turn
        self._tools: dict[str, Callable[[Mapping[str, Any]], ToolRun]] = {
            "list_files": self.list_files,
            "read_file": self.read_file,
            "search": self.search,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "run_command": self.run_command,
            "finish": self.finish,
        }
        if children is not None:
            self._tools["spawn_session"] = self.spawn_session
            self._tools["session_status"] = self.session_status

    def specs(self) -> list[dict[str, Any]]:
        return SPECS + (CHILD_SPECS if self.children is not None else [])

    def names(self) -> list[str]:
        return list(self._tools)

    def run(self, name: str, args: Mapping[str, Any]) -> ToolRun:
        """Run tool `name`; raises KeyError for an unknown tool, ToolInputError for bad
        arguments, Stopped when the turn is stopped. Sandbox errors become failed outcomes."""
        tool = self._tools[name]
        waited = 0.0
        if name in WRITING_TOOLS:
            waited = yield from self._wait_for_sync(name)
        try:
            outcome = yield from tool(args)
        except PathEscapesWorkspace as exc:
            outcome = ToolOutcome(str(exc), ok=False)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
            outcome = ToolOutcome(str(exc), ok=False)
        except AgentError as exc:
            outcome = ToolOutcome(str(exc), ok=False)
        except SandboxGone:
            raise  # the turn cannot go on; the runner resumes from the last snapshot
        except SandboxError as exc:
            if self.stopped.is_set():
                raise Stopped() from None
            outcome = ToolOutcome(f"the sandbox refused: {exc}", ok=False)
        if waited:
            outcome.data["waited_for_sync_ms"] = round(waited * 1000, 1)
        return outcome

    def kill(self) -> None:
        with self._lock:
            handle = self._handle
        if handle is not None:
            handle.kill()

    # -- helpers --------------------------------------------------------------------------
    def _wait_for_sync(self, name: str) -> Generator[AgentEvent, None, float]:
        sync = self.sync_done
        if sync is None or sync.is_set():
            return 0.0
        started = time.monotonic()
        yield AgentEvent(
            "output",
            {"stream": "agent", "text": f"{name} waits for the workspace sync to finish"},
        )
        while not sync.wait(0.05):
            if self.stopped.is_set():
                raise Stopped()
        return time.monotonic() - started

    def _exec(self, command, *, timeout: float) -> ExecHandle:
        with self._lock:
            if self.stopped.is_set():
                raise Stopped()
            # The agent's secrets make each command contained (see Sandbox.exec).
            self._handle = self.sandbox.exec(
                command, secrets=self.env, cwd="/workspace", timeout=timeout
            )
            return self._handle

    def _done_exec(self) -> None:
        with self._lock:
            self._handle = None

    def _remaining(self, wanted: float) -> float:
        if self.deadline is None:
            return wanted
        return max(1.0, min(wanted, self.deadline - time.monotonic()))

    def _read_text(self, path: str) -> str:
        data = self.sandbox.read_file(path)
        if b"\x00" in data[:8192]:
            raise ToolInputError(f"{path} is a binary file ({len(data):,} bytes)")
        return data.decode("utf-8", errors="replace")

    # -- the tools ------------------------------------------------------------------------
    def list_files(self, args: Mapping[str, Any]) -> ToolRun:
        root = _arg(args, "path", str, ".")
        depth = max(1, min(4, _arg(args, "depth", int, 1)))
        lines: list[str] = []
        pending = [(root, 1)]
        while pending and len(lines) < LIST_MAX_ENTRIES:
            path, level = pending.pop(0)
            for entry in self.sandbox.list_files(path):
                if entry.is_dir and entry.name in SKIP_DIRS:
                    continue
                lines.append(
                    f"{entry.path}/" if entry.is_dir else f"{entry.path}  ({entry.size} B)"
                )
                if entry.is_dir and level < depth:
                    pending.append((entry.path, level + 1))
                if len(lines) >= LIST_MAX_ENTRIES:
                    lines.append(f"… stopped after {LIST_MAX_ENTRIES} entries; list a subdirectory")
                    break
        return ToolOutcome("\n".join(sorted(lines)) or "(empty directory)")
        yield  # a generator, like every tool

    def read_file(self, args: Mapping[str, Any]) -> ToolRun:
        path = _arg(args, "path", str)
        text = self._read_text(path)
        lines = text.splitlines()
        start = max(1, _arg(args, "start_line", int, 1))
        end = _arg(args, "end_line", int, start + READ_MAX_LINES - 1)
        end = min(len(lines), end, start + READ_MAX_LINES - 1)
        if not lines:
            return ToolOutcome(f"{path} is empty")
        if start > len(lines):
            return ToolOutcome(f"{path} has only {len(lines)} lines", ok=False)
        body = "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(start, end + 1))
        more = f"\n… {len(lines) - end} more lines" if end < len(lines) else ""
        return ToolOutcome(head_tail(body) + more, data={"lines": [start, end]})
        yield

    def search(self, args: Mapping[str, Any]) -> ToolRun:
        pattern = _arg(args, "pattern", str)
        path = _arg(args, "path", str, ".")
        argv = ["grep", "-rnHIE", "--color=never"]
        argv += [f"--exclude-dir={d}" for d in sorted(SKIP_DIRS)]
        if _arg(args, "ignore_case", bool, False):
            argv.append("-i")
        glob = _arg(args, "glob", str, "")
        if glob:
            argv.append(f"--include={glob}")
        argv += ["-e", pattern, "--", path]
        handle = self._exec(argv, timeout=self._remaining(SEARCH_TIMEOUT))
        try:
            found: list[str] = []
            errors: list[str] = []
            for line in handle:
                target = found if line.stream == "stdout" else errors
                if len(target) < SEARCH_MAX_LINES:
                    target.append(line.text.removeprefix("./"))
                elif target is found and len(found) == SEARCH_MAX_LINES:
                    found.append(f"… more than {SEARCH_MAX_LINES} matches; narrow the search")
            result = handle.wait()
        finally:
            self._done_exec()
        if self.stopped.is_set():
            raise Stopped()
        if result.exit_code == 1:
            return ToolOutcome("no matches")
        if result.exit_code != 0:
            return ToolOutcome("grep failed: " + "\n".join(errors), ok=False)
        return ToolOutcome(head_tail("\n".join(found)), data={"matches": len(found)})
        yield

    def write_file(self, args: Mapping[str, Any]) -> ToolRun:
        path = _arg(args, "path", str)
        content = _arg(args, "content", str)
        try:
            before: str | None = self._read_text(path)
        except FileNotFoundError:
            before = None
        except ToolInputError:
            before = ""
        self.touched = True
        self.sandbox.write_file(path, content.encode())
        added, removed = line_counts(before or "", content)
        action = "create" if before is None else "write"
        edit = {"path": path, "action": action, "added": added, "removed": removed}
        return ToolOutcome(f"wrote {path} ({len(content.encode())} bytes)", edits=[edit])
        yield

    def edit_file(self, args: Mapping[str, Any]) -> ToolRun:
        path = _arg(args, "path", str)
        old = _arg(args, "old_string", str)
        new = _arg(args, "new_string", str)
        replace_all = _arg(args, "replace_all", bool, False)
        if not old:
            raise ToolInputError("old_string is empty; use write_file to create a file")
        text = self._read_text(path)
        count = text.count(old)
        if count == 0:
            return ToolOutcome(
                f"old_string was not found in {path}; read the file and copy the text exactly",
                ok=False,
            )
        if count > 1 and not replace_all:
            return ToolOutcome(
                f"old_string appears {count} times in {path}; add surrounding lines to make it "
                "unique, or set replace_all",
                ok=False,
            )
        after = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        self.touched = True
        self.sandbox.write_file(path, after.encode())
        added, removed = line_counts(text, after)
        edit = {"path": path, "action": "edit", "added": added, "removed": removed}
        n = count if replace_all else 1
        return ToolOutcome(f"replaced {n} occurrence{'s' if n > 1 else ''} in {path}", edits=[edit])
        yield

    def run_command(self, args: Mapping[str, Any]) -> Generator[AgentEvent, None, ToolOutcome]:
        command = _arg(args, "command", str)
        wanted = float(_arg(args, "timeout_seconds", int, 120))
        timeout = self._remaining(max(1.0, min(wanted, self.command_timeout)))
        approval = None
        if self.approvals is not None and self.approvals.needs_approval(command):
            yield AgentEvent(
                "output", {"stream": "agent", "text": f"waiting for approval to run: {command}"}
            )
            approved, why, approval = self.approvals.wait_for_approval(command, self.stopped)
            if self.stopped.is_set():
                raise Stopped()
            if not approved:
                return ToolOutcome(f"the command was not run: {why}", ok=False)
        self.touched = True
        started = time.monotonic()
        handle = self._exec(command, timeout=timeout)
        lines: list[str] = []
        try:
            for line in handle:
                lines.append(line.text)
                yield AgentEvent("output", {"stream": line.stream, "text": line.text})
            result = handle.wait()
        finally:
            self._done_exec()
        if self.stopped.is_set():
            raise Stopped()
        text = head_tail("\n".join(lines))
        if approval is not None:
            self.approvals.record(approval, ok=result.ok, result={"exit_code": result.exit_code})
        if result.timed_out:
            status = f"timed out after {timeout:.0f} s and was killed"
        elif result.limit_hit:
            status = f"was killed by the sandbox's {result.limit_hit} limit"
        else:
            status = f"exited with status {result.exit_code}"
        return ToolOutcome(
            f"the command {status}\n{text}".rstrip(),
            ok=result.ok,
            data={
                "exit_code": result.exit_code,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
                "timed_out": result.timed_out,
                "limit_hit": result.limit_hit,
            },
        )

    def finish(self, args: Mapping[str, Any]) -> ToolRun:
        summary = _arg(args, "summary", str, "")
        return ToolOutcome("the turn is finished", finished=True, data={"summary": summary})
        yield

    def spawn_session(self, args: Mapping[str, Any]) -> ToolRun:
        assert self.children is not None
        repository = _arg(args, "repository", str)
        prompt = _arg(args, "prompt", str)
        child = self.children.spawn(repository, prompt)
        return ToolOutcome(f"started session {child.get('id')}: {child}", data={"child": child})
        yield

    def session_status(self, args: Mapping[str, Any]) -> ToolRun:
        assert self.children is not None
        status = self.children.status(_arg(args, "session_id", int))
        return ToolOutcome(str(status), data={"child": status})
        yield
