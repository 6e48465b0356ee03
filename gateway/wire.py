"""The providers' wire formats as the gateway needs them: which routes it serves, what a request
must hold (model, stream), the usage a response reports (JSON or server-sent events, cached
tokens included), and error bodies each provider's clients display."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ANTHROPIC = "anthropic"
OPENAI = "openai"


@dataclass(frozen=True)
class Route:
    """One endpoint the gateway serves: its provider, its name in a ModelRequest, the path
    after the provider's upstream base, and whether it carries a JSON body naming a model."""

    provider: str
    endpoint: str
    upstream_path: str
    has_body: bool


ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/anthropic/v1/messages"): Route(ANTHROPIC, "messages", "/v1/messages", True),
    ("POST", "/anthropic/v1/messages/count_tokens"): Route(
        ANTHROPIC, "count_tokens", "/v1/messages/count_tokens", True
    ),
    ("GET", "/anthropic/v1/models"): Route(ANTHROPIC, "models", "/v1/models", False),
    ("POST", "/openai/v1/chat/completions"): Route(
        OPENAI, "chat.completions", "/chat/completions", True
    ),
    ("POST", "/openai/v1/responses"): Route(OPENAI, "responses", "/responses", True),
    ("GET", "/openai/v1/models"): Route(OPENAI, "models", "/models", False),
}


def route_for(method: str, path: str) -> Route | None:
    return ROUTES.get((method, path.rstrip("/") or "/"))


def provider_of(path: str) -> str:
    """Whose error shape a path's client expects (OpenAI's for anything unknown)."""
    return ANTHROPIC if path.startswith("/anthropic/") else OPENAI


class BadRequest(ValueError):
    """A request the gateway refuses before forwarding: `field` names what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


@dataclass(frozen=True)
class RequestInfo:
    model: str
    stream: bool


# Fields each endpoint must carry, beyond `model`, and their JSON type.
_REQUIRED: dict[str, tuple[tuple[str, type, str], ...]] = {
    "messages": (("messages", list, "an array"), ("max_tokens", int, "an integer")),
    "count_tokens": (("messages", list, "an array"),),
    "chat.completions": (("messages", list, "an array"),),
    "responses": (),
}


def parse_request(endpoint: str, body: bytes) -> RequestInfo:
    """The model and stream flag of a request body; BadRequest naming the field otherwise."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise BadRequest("body", f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest("body", "must be a JSON object")
    model = data.get("model")
    if model is None:
        raise BadRequest("model", "Field required")
    if not isinstance(model, str) or not model.strip():
        raise BadRequest("model", "must be a non-empty string")
    for field, kind, name in _REQUIRED[endpoint]:
        value = data.get(field)
        if value is None:
            raise BadRequest(field, "Field required")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise BadRequest(field, f"must be {name}")
    stream = data.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest("stream", "must be true or false")
    if endpoint == "responses" and not isinstance(data.get("input", ""), str | list):
        raise BadRequest("input", "must be a string or an array")
    return RequestInfo(model=model, stream=bool(stream))


def error_body(provider: str, kind: str, message: str, code: str | None = None) -> bytes:
    """An error as the provider's own clients parse and show it."""
    if provider == ANTHROPIC:
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    error = {"message": message, "type": kind, "param": None, "code": code or kind}
    return json.dumps({"error": error}).encode()


@dataclass
class Usage:
    """Tokens as the gateway meters them: `input_tokens` counts every prompt token (cached and
    cache writes included, as OpenAI reports them); `cached_tokens` those read from a cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class UsageMeter:
    """Reads the usage out of a response as it passes, without holding it: only the lines of a
    stream that mention usage are parsed (a stream's thousands of deltas are not)."""

    # A longer line without a newline is not an SSE line worth keeping.
    MAX_LINE = 4 * 1024 * 1024

    def __init__(self, provider: str, endpoint: str, stream: bool) -> None:
        self.provider, self.endpoint, self.stream = provider, endpoint, stream
        self.usage = Usage()
        self._tail = b""
        self._json = bytearray()  # a non-streamed body (bounded by MAX_LINE)

    def feed(self, chunk: bytes) -> None:
        if not self.stream:
            if len(self._json) + len(chunk) <= self.MAX_LINE:
                self._json += chunk
            return
        data = self._tail + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._tail = data if len(data) <= self.MAX_LINE else b""
            return
        lines, self._tail = data[:cut], data[cut + 1 :]
        if b'"usage"' not in lines:
            return
        for line in lines.split(b"\n"):
            if line.startswith(b"data:") and b'"usage"' in line:
                try:
                    event = json.loads(line[5:])
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self._event(event)

    def finish(self) -> Usage:
        if self.stream:
            self.feed(b"\n")
        elif self._json:
            try:
                body = json.loads(bytes(self._json))
            except ValueError:
                body = None
            if isinstance(body, dict):
                self._whole(body)
        return self.usage

    def _whole(self, body: dict[str, Any]) -> None:
        if self.endpoint == "count_tokens":
            self.usage.input_tokens = _int(body.get("input_tokens"))
        elif isinstance(body.get("usage"), dict):
            self._take(body["usage"])

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            usage = event["message"].get("usage")  # Anthropic: input (and a first output count)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            usage = (event.get("response") or {}).get("usage")  # OpenAI Responses
        else:
            usage = event.get("usage")  # Anthropic message_delta; a Chat Completions chunk
        if isinstance(usage, dict):
            self._take(usage)

    def _take(self, usage: dict[str, Any]) -> None:
        u = self.usage
        if self.provider == ANTHROPIC:
            # message_delta carries the final output count (and input counts on some versions).
            fresh = _int(usage.get("input_tokens"))
            writes = _int(usage.get("cache_creation_input_tokens"))
            reads = _int(usage.get("cache_read_input_tokens"))
            if fresh or writes or reads:
                u.input_tokens = fresh + writes + reads
                u.cached_tokens = reads
            u.output_tokens = max(u.output_tokens, _int(usage.get("output_tokens")))
            return
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        u.input_tokens = _int(usage.get("prompt_tokens")) or _int(usage.get("input_tokens"))
        u.output_tokens = _int(usage.get("completion_tokens")) or _int(usage.get("output_tokens"))
        u.cached_tokens = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
