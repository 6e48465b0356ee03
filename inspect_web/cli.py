"""`inspect`: the command-line client of an Inspect Web server (over its REST API).

    inspect login URL [--token T]     verify a token and keep it (0600) in the config dir
    inspect run REPO "prompt" [--watch] [--agent A] [--agent-command CMD] [--model M]
    inspect sessions [--repository R] [--state S]
    inspect watch ID
    inspect prompt ID "text" [--watch]
    inspect stop ID

Exit codes (also for scripts and CI):
    0  done: the command worked; after watching, the session is idle (or has a PR open) and its
       verification passed, or it had nothing to verify
    1  the session finished, but its verification failed
    2  usage error (unknown command or option)
    3  error: the server could not be reached, refused the token, or refused the request
    4  the session failed or was cancelled
    130 interrupted (Ctrl-C)

Configuration: `$XDG_CONFIG_HOME/inspect/config.json` (default `~/.config/inspect/`), or
`INSPECT_CONFIG`; `INSPECT_URL` and `INSPECT_TOKEN` override what it holds.
"""

from __future__ import annotations

import argparse
import getpass
import itertools
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from inspect_web.text import inert

OK, VERIFICATION_FAILED, USAGE, ERROR, SESSION_FAILED, INTERRUPTED = 0, 1, 2, 3, 4, 130
DONE = {"idle", "pr_open", "merged", "closed", "failed", "cancelled"}
RECONNECT_SECONDS = 2.0


class CliError(Exception):
    """One line for the terminal, and the exit code that goes with it."""

    def __init__(self, message: str, code: int = ERROR) -> None:
        super().__init__(message)
        self.code = code


# Configuration


def config_path() -> Path:
    if os.environ.get("INSPECT_CONFIG"):
        return Path(os.environ["INSPECT_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "inspect" / "config.json"


def load_config() -> dict[str, str]:
    path = config_path()
    config: dict[str, str] = {}
    if path.exists():
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read {path} ({exc}); run `inspect login URL` again") from None
    for key, variable in (("url", "INSPECT_URL"), ("token", "INSPECT_TOKEN")):
        if os.environ.get(variable):
            config[key] = os.environ[variable]
    if not config.get("url") or not config.get("token"):
        raise CliError("not logged in: run `inspect login URL` first")
    return config


def save_config(url: str, token: str) -> Path:
    """Write the config readable by its owner only (the token is a password)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w") as out:
        json.dump({"url": url, "token": token}, out)
    return path


# HTTP


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=httpx.Timeout(30.0),
        )

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach {self.url} ({exc}); is the server running?") from None
        return self._body(response)

    def _body(self, response: httpx.Response) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_success:
            return body
        detail = body.get("detail") if isinstance(body, dict) else None
        if response.status_code == 401:
            raise CliError(
                f"{self.url} refused the token ({detail or 'unauthorised'}); "
                "run `inspect login URL` with a new token"
            )
        raise CliError(detail or f"{response.request.method} {response.request.url.path} "
                       f"answered {response.status_code}")  # fmt: skip

    def stream(self, session_id: int, after: int):
        """Yield (seq, event) from the server-sent events, resuming after a dropped connection."""
        while True:
            try:
                with self.client.stream(
                    "GET",
                    f"/api/sessions/{session_id}/events/stream/",
                    headers={"Accept": "text/event-stream", "Last-Event-ID": str(after)},
                    timeout=httpx.Timeout(30.0, read=60.0),  # keepalives come every 15 s
                ) as response:
                    if not response.is_success:
                        response.read()
                        self._body(response)
                    data: list[str] = []
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            data.append(line[5:].lstrip())
                        elif line == "" and data:
                            event = json.loads("\n".join(data))
                            data = []
                            after = event["seq"]
                            yield event
            except httpx.HTTPError:
                time.sleep(RECONNECT_SECONDS)  # the stream resumes after the last seq seen


# Output


class Terminal:
    """Colour and a progress line only when writing to a terminal (and NO_COLOR is unset)."""

    COLOURS = {"status": "36", "prompt": "1;35", "error": "31", "ok": "32", "fail": "31",
               "command": "33", "diff": "34", "dim": "2"}  # fmt: skip

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.colour = self.tty and not os.environ.get("NO_COLOR")
        self.progress = sys.stderr.isatty()
        self.status = "connecting"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._spinner: threading.Thread | None = None

    def paint(self, text: str, style: str) -> str:
        return f"\033[{self.COLOURS[style]}m{text}\033[0m" if self.colour else text

    def line(self, text: str) -> None:
        with self._lock:
            if self.progress:
                sys.stderr.write("\r\033[K")
            print(text, flush=True)

    def start_progress(self) -> None:
        if self.progress and self._spinner is None:
            self._spinner = threading.Thread(target=self._spin, daemon=True)
            self._spinner.start()

    def stop_progress(self) -> None:
        self._stop.set()
        if self._spinner:
            self._spinner.join()
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def _spin(self) -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            if self._stop.wait(0.1):
                return
            with self._lock:
                sys.stderr.write(f"\r\033[K{frame} {self.status}")
                sys.stderr.flush()


def describe(event: dict, term: Terminal, base_url: str = "") -> str | None:
    """One terminal line for an event (None: not worth a line); what the server sent is
    printed inert (see `inert`)."""
    kind, p = event["kind"], inert(event.get("payload") or {})
    seq = term.paint(f"{event['seq']:>5}", "dim")
    if kind == "state":
        text = f"state {p.get('from', '?')} → {p.get('to', '?')}"
        if p.get("reason"):
            text += f" ({p['reason']})"
        return f"{seq} {term.paint(text, 'status')}"
    if kind == "stop_requested":
        return f"{seq} {term.paint('stop requested by ' + str(p.get('by', '?')), 'status')}"
    if kind == "pull_request_published":
        url = p.get("pr_url") or ""
        url = base_url + url if url.startswith("/") else url  # reviewed on the server itself
        text = f"pull request {'opened' if p.get('opened') else 'updated'}: {url}"
        return f"{seq} {term.paint(text, 'status')}"
    if kind == "pull_request_merged":
        return f"{seq} {term.paint('pull request merged', 'status')}"
    if kind == "prompt":
        first = ((p.get("text") or "").splitlines() or [""])[0]
        asked = term.paint(f"{p.get('author')} asked (prompt {p.get('order')}):", "prompt")
        return f"{seq} {asked} {first}"
    if kind == "command":
        ok = p.get("ok")
        mark = term.paint("✓", "ok") if ok else term.paint("✗", "fail")
        phase = term.paint(p.get("phase", "command"), "command")
        return f"{seq} {mark} {phase} $ {p.get('command', '')}"
    if kind == "diff":
        counts = f"+{p.get('added', 0)} -{p.get('removed', 0)}"
        return f"{seq} {term.paint('changed', 'diff')} {p.get('path')} {counts}"
    if kind == "error":
        return f"{seq} {term.paint('error:', 'error')} {p.get('message', '')}"
    if kind in {"budget_paused", "budget_resumed"}:  # the message names the budget and the page
        paint = "error" if kind == "budget_paused" else "status"
        return f"{seq} {term.paint(kind.replace('_', ' ') + ':', paint)} {p.get('message', '')}"
    if kind in {"output", "agent_message", "reasoning"}:
        return f"{seq} {p.get('text', p.get('line', ''))}"
    if kind == "screenshot":
        url = p.get("url", "")
        url = base_url + url if url.startswith("/") else url
        shot = f"{p.get('label')} of {p.get('path')}: {url}"
        return f"{seq} {term.paint('screenshot', 'dim')} {shot}"
    if kind == "terminal":
        typed = term.paint(f"{p.get('user')} typed:", "dim")
        return f"{seq} {typed} {p.get('input', '')}"
    if kind == "model_request":
        cost = p.get("cost_usd")
        text = (
            f"model {p.get('model') or '?'}: {p.get('input_tokens', 0)} in / "
            f"{p.get('output_tokens', 0)} out, "
            f"{'unpriced' if cost is None else f'${cost:.4f}'}, {p.get('latency_ms', 0):.0f} ms"
        )
        if p.get("outcome", "ok") != "ok":
            failed = f"{p.get('status')} {p.get('outcome')}: {p.get('message', '')}"
            return f"{seq} {term.paint(text, 'dim')} {term.paint(failed, 'error')}"
        return f"{seq} {term.paint(text, 'dim')}"
    if kind in {"tool_call", "tool_result", "approval", "file_edit"}:
        summary = p.get("name") or p.get("action") or p.get("path") or ""
        return f"{seq} {term.paint(kind.replace('_', ' '), 'dim')} {summary}"
    return None


# Commands


@dataclass
class Context:
    api: Api
    term: Terminal


def watch(ctx: Context, session_id: int, *, after: int = 0) -> int:
    """Print the session's events until it is done; the exit code says how it ended."""
    term = ctx.term
    session = ctx.api.call("GET", f"/api/sessions/{session_id}/")
    term.status = f"#{session_id} {session['state']}"
    finish_at: int | None = None
    term.start_progress()
    try:
        for event in ctx.api.stream(session_id, after):
            text = describe(event, term, ctx.api.url)
            if text:
                term.line(text)
            to = (event.get("payload") or {}).get("to") if event["kind"] == "state" else None
            if to:
                term.status = f"#{session_id} {to}"
            if to in DONE:
                session = ctx.api.call("GET", f"/api/sessions/{session_id}/")
                if session["state"] in DONE and not session["busy"]:
                    finish_at = session["last_seq"]  # print what is left, then stop
            if finish_at is not None and event["seq"] >= finish_at:
                break
    finally:
        term.stop_progress()
    return outcome(ctx, session_id)


def outcome(ctx: Context, session_id: int) -> int:
    session = inert(ctx.api.call("GET", f"/api/sessions/{session_id}/"))
    term = ctx.term
    state, verification = session["state"], session["verification"]
    if state in {"failed", "cancelled"}:
        term.line(
            term.paint(
                f"session #{session_id} {state}: {session.get('error') or ''}".rstrip(": "), "fail"
            )
        )
        return SESSION_FAILED
    if verification["passed"] is False:
        failed = [c["command"] for c in verification["commands"] if not c["ok"]]
        term.line(term.paint(f"verification failed: {', '.join(failed)}", "fail"))
        return VERIFICATION_FAILED
    passed = "verification passed" if verification["passed"] else "nothing to verify"
    term.line(term.paint(f"session #{session_id} {state}; {passed} — {session['url']}", "ok"))
    return OK


def cmd_login(args: argparse.Namespace, term: Terminal) -> int:
    url = args.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise CliError(
            f"{url} is not an http(s) URL; give the server's address, e.g. https://inspect.example.com"
        )
    token = args.token or os.environ.get("INSPECT_TOKEN") or ""
    if not token:
        if not sys.stdin.isatty():
            raise CliError("no token: pass --token, or run interactively to be asked for one")
        print(f"Create a token at {url}/account/tokens/ and paste it here.")
        token = getpass.getpass("Token: ").strip()
    me = Api(url, token).call("GET", "/api/me/")
    path = save_config(url, token)
    term.line(f"Logged in to {url} as {me['username']} (token saved in {path}).")
    return OK


def cmd_run(args: argparse.Namespace, ctx: Context) -> int:
    body = {"repository": args.repo, "prompt": args.prompt}
    for key in ("agent", "agent_command", "model", "branch"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    session = ctx.api.call("POST", "/api/sessions/", json=body)
    ctx.term.line(session["url"])
    return watch(ctx, session["id"]) if args.watch else OK


def cmd_sessions(args: argparse.Namespace, ctx: Context) -> int:
    params = {k: v for k, v in (("repository", args.repository), ("state", args.state)) if v}
    sessions = ctx.api.call("GET", "/api/sessions/", params=params)
    if args.json:
        print(json.dumps(sessions, indent=2))
        return OK
    if not sessions:
        ctx.term.line("No sessions.")
    for s in inert(sessions):
        ctx.term.line(f"#{s['id']:<6} {s['state']:<12} {s['repository']:<20} {s['title'][:60]}")
    return OK


def cmd_watch(args: argparse.Namespace, ctx: Context) -> int:
    return watch(ctx, args.id)


def cmd_prompt(args: argparse.Namespace, ctx: Context) -> int:
    prompt = ctx.api.call("POST", f"/api/sessions/{args.id}/prompts/", json={"text": args.text})
    ctx.term.line(f"Prompt {prompt['order']} queued in session #{args.id}.")
    return watch(ctx, args.id) if args.watch else OK


def cmd_stop(args: argparse.Namespace, ctx: Context) -> int:
    result = ctx.api.call("POST", f"/api/sessions/{args.id}/stop/")
    ctx.term.line("Stopping the running turn." if result["stopping"] else "Nothing is running.")
    return OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="inspect",
        description="Start and follow background coding-agent sessions on an Inspect Web server.",
        epilog="Exit codes: 0 done/verification passed, 1 verification failed, 2 usage, "
        "3 error, 4 session failed or cancelled.",
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    login = commands.add_parser("login", help="verify and store an API token")
    login.add_argument("url", help="the server, e.g. https://inspect.example.com")
    login.add_argument("--token", help="an API token (default: ask)")
    run = commands.add_parser("run", help="start a session in a repository")
    run.add_argument("repo")
    run.add_argument("prompt")
    run.add_argument("--watch", action="store_true", help="stream its events until it is done")
    run.add_argument("--agent", help="builtin, command, opencode, claude-code or codex")
    run.add_argument("--agent-command", dest="agent_command", help="for the command agent")
    run.add_argument("--model")
    run.add_argument("--branch")
    sessions = commands.add_parser("sessions", help="list sessions, newest first")
    sessions.add_argument("--repository")
    sessions.add_argument("--state")
    sessions.add_argument("--json", action="store_true")
    watch_ = commands.add_parser("watch", help="stream a session's events until it is done")
    watch_.add_argument("id", type=int)
    prompt = commands.add_parser("prompt", help="queue a follow-up prompt")
    prompt.add_argument("id", type=int)
    prompt.add_argument("text")
    prompt.add_argument("--watch", action="store_true")
    stop = commands.add_parser("stop", help="stop the running turn")
    stop.add_argument("id", type=int)
    return top


HANDLERS = {"run": cmd_run, "sessions": cmd_sessions, "watch": cmd_watch,
            "prompt": cmd_prompt, "stop": cmd_stop}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    term = Terminal()
    try:
        if args.command == "login":
            return cmd_login(args, term)
        config = load_config()
        return HANDLERS[args.command](args, Context(Api(config["url"], config["token"]), term))
    except CliError as exc:
        print(f"inspect: {inert(str(exc))}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
