"""Agent runtime fixtures: real local sandboxes, and local HTTP servers that speak the model
APIs' real wire formats (OpenAI Chat Completions, Anthropic Messages) from a script."""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sessions.agents.base import AgentEvent, Author, Turn, TurnLimits
from sessions.agents.builtin import BuiltinAgent
from sessions.agents.llm import AnthropicMessages, OpenAIChat
from tests.gateway.conftest import (  # noqa: F401 - fixtures
    fresh_upstream,
    gateway,
    mint,
    start_gateway,
    upstream,
)
from tests.sessions.agents.gateway_fixtures import gateway_boxes, platform_gateway  # noqa: F401

MODEL_KEY = "sk-test-" + secrets.token_hex(16)
AUTHOR = Author(username="engineer", name="Ada Engineer", email="ada@example.com")

_ids = itertools.count(1)


# -- OpenAI Chat Completions bodies (https://platform.openai.com/docs/api-reference/chat) ----
def chat_tool_calls(*calls, text=None, model="gpt-4.1", prompt_tokens=1000, completion_tokens=50):
    """A completion asking for tool calls; each call is (name, arguments as dict or raw str)."""
    tool_calls = [
        {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
        for name, arguments in calls
    ]
    message = {"role": "assistant", "content": text, "tool_calls": tool_calls}
    return _completion(message, "tool_calls", model, prompt_tokens, completion_tokens)


def chat_message(text, *, model="gpt-4.1", prompt_tokens=1000, completion_tokens=50):
    message = {"role": "assistant", "content": text}
    return _completion(message, "stop", model, prompt_tokens, completion_tokens)


def _completion(message, finish_reason, model, prompt_tokens, completion_tokens):
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 1_750_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def openai_error(message, *, type_="invalid_request_error", code=None):
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# -- Anthropic Messages bodies (https://docs.anthropic.com/en/api/messages) -------------------
def messages_tool_use(*calls, text=None, model="claude-sonnet-4-5-20250929", usage=(900, 40)):
    content = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": arguments}
        for name, arguments in calls
    ]
    return _message(content, "tool_use", model, usage)


def messages_text(text, *, model="claude-sonnet-4-5-20250929", usage=(900, 40)):
    return _message([{"type": "text", "text": text}], "end_turn", model, usage)


def _message(content, stop_reason, model, usage):
    return {
        "id": f"msg_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


# -- the fake server ----------------------------------------------------------------------------
@dataclass
class Reply:
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


class FakeModelAPI:
    """Answers each POST with the next scripted Reply (a bare dict is a 200 JSON body) and
    records every request. With the script exhausted it answers 500, so a runaway loop shows."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.closing = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                fake.requests.append(
                    Request(
                        path=self.path,
                        headers={k.lower(): v for k, v in self.headers.items()},
                        body=json.loads(raw or b"{}"),
                        at=time.monotonic(),
                    )
                )
                reply = (
                    fake.script.popleft()
                    if fake.script
                    else Reply(
                        openai_error("the fake model has no more scripted replies"), status=500
                    )
                )
                if fake.closing.wait(reply.delay):
                    return
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def push(self, *replies: Reply | dict) -> FakeModelAPI:
        for reply in replies:
            self.script.append(reply if isinstance(reply, Reply) else Reply(reply))
        return self

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_model():
    fake = FakeModelAPI()
    yield fake
    fake.close()


# -- sandboxes and turns ------------------------------------------------------------------------
WORKSPACE_FILES = {
    "README.md": "# widgets\n",
    "AGENTS.md": "Run `sh check.sh` before finishing.\n",
    "check.sh": "grep -q 'Hello, ' src/greet.py && echo ok\n",
    "src/greet.py": "def greet(name):\n    return 'Hi ' + name\n",
    "src/util.py": "".join(f"line {n}\n" for n in range(1, 101)),
}


@pytest.fixture
def sandbox(tmp_path):
    """A real local sandbox whose workspace holds WORKSPACE_FILES."""
    from snapshots.backends import sandbox_backend

    src = tmp_path / "workspace"
    for name, text in WORKSPACE_FILES.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    backend = sandbox_backend()
    ref = backend.snapshot_from_directory(str(src))
    box = backend.create(snapshot=ref)
    yield box
    box.terminate()
    backend.delete_snapshot(ref)


def make_turn(sandbox, prompt: str = "make greet say Hello", **kwargs) -> Turn:
    kwargs.setdefault("instructions", WORKSPACE_FILES["AGENTS.md"])
    kwargs.setdefault("limits", TurnLimits())
    kwargs.setdefault("author", AUTHOR)
    return Turn(sandbox=sandbox, prompt=prompt, **kwargs)


def openai_agent(fake: FakeModelAPI, model: str = "gpt-4.1", **kwargs) -> BuiltinAgent:
    kwargs.setdefault("backoff_seconds", 0.01)
    client = OpenAIChat(base_url=fake.url + "/v1", api_key=MODEL_KEY, model=model)
    return BuiltinAgent(client, **kwargs)


def anthropic_agent(fake: FakeModelAPI, **kwargs) -> BuiltinAgent:
    kwargs.setdefault("backoff_seconds", 0.01)
    client = AnthropicMessages(
        base_url=fake.url, api_key=MODEL_KEY, model="claude-sonnet-4-5-20250929"
    )
    return BuiltinAgent(client, **kwargs)


def run(agent, turn) -> list[AgentEvent]:
    return list(agent.run(turn))


def timed(agent, turn) -> list[tuple[float, AgentEvent]]:
    return [(time.monotonic(), event) for event in agent.run(turn)]


def of_kind(events, kind: str) -> list[dict]:
    return [e.data for e in events if e.kind == kind]
