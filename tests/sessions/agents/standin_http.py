"""Plain HTTP to the stand-in model (tests/standin_model/), as each provider's clients send it:
the request bodies and the calls the stand-in's tests share."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from tests.standin_model import StandinModel, iter_sse

KEY = "sk-standin-test"
CREATE = "printf '%s\\n' 'hello' > notes.txt"


def call(
    standin: StandinModel,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    key: str | None = KEY,
    anthropic: bool = False,
    method: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes, dict[str, str]]:
    hdrs = {"content-type": "application/json", **(headers or {})}
    if key is not None:
        if anthropic:
            hdrs["x-api-key"] = key
            hdrs["anthropic-version"] = "2023-06-01"
        else:
            hdrs["authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(standin.url + path, data=data, headers=hdrs, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, err.read(), {k.lower(): v for k, v in err.headers.items()}


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    return [(e, d if d == "[DONE]" else json.loads(d)) for e, d in iter_sse(raw)]


BASH = {
    "name": "Bash",
    "description": "Run a command",
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "description": {"type": "string"},
            "timeout": {"type": "number"},
        },
        "required": ["command", "description"],
    },
}


def anthropic_body(messages: list[dict[str, Any]], *, stream: bool = False, **kw: Any) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": messages,
        "tools": [BASH],
        "stream": stream,
        **kw,
    }


def user(text: str) -> dict[str, Any]:
    # Claude Code wraps the prompt among reminder blocks.
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>be careful</system-reminder>"},
            {"type": "text", "text": text},
        ],
    }
