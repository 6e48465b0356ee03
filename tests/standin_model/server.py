"""The HTTP server: routing, keys and models, recording every request for tests to assert on."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .anthropic import anthropic_conversation, anthropic_error, anthropic_reply
from .conversation import (
    DEFAULT_MODELS,
    DEFAULT_PREFIXES,
    decide,
    decision_summary,
    estimate_tokens,
    new_id,
)
from .openai import (
    chat_conversation,
    chat_reply,
    input_items,
    openai_error,
    responses_conversation,
    responses_reply,
)
from .wire import Reply


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
        return any(i.get("type") == "additional_tools" for i in input_items(self.body))

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


def _masked(key: str) -> str:
    return (key[:3] + "*" * 4 + key[-4:]) if len(key) > 8 else "****"


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
                reply = Reply(
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
        ) -> Reply:
            is_anthropic = api in ("anthropic", "count_tokens") or (
                api in ("models", "model")
                and ("anthropic-version" in headers or "x-api-key" in headers)
            )
            if headers.get("upgrade", "").lower() == "websocket":
                # No websockets here: clients fall back to plain HTTPS requests.
                return Reply(
                    standin.websocket_status,
                    openai_error("websockets are not supported", "invalid_request_error", None),
                )
            if not standin.key_ok(headers):
                if is_anthropic:
                    return Reply(401, anthropic_error("authentication_error", "invalid x-api-key"))
                given = (headers.get("authorization") or "")[7:].strip()
                message = (
                    f"Incorrect API key provided: {_masked(given)}. You can find your API key "
                    "at https://platform.openai.com/account/api-keys."
                    if given
                    else "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
                )
                return Reply(401, openai_error(message, "invalid_request_error", "invalid_api_key"))
            if api == "models" and self.command in ("GET", "HEAD"):
                return Reply(200, _models_body(standin, is_anthropic))
            if api == "model" and self.command == "GET":
                name = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
                if not standin.accepts_model(name):
                    return self._refuse(name, is_anthropic)
                if is_anthropic:
                    return Reply(
                        200,
                        {
                            "type": "model",
                            "id": name,
                            "display_name": name,
                            "created_at": "2025-09-29T00:00:00Z",
                        },
                    )
                return Reply(
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
                    return Reply(404, anthropic_error("not_found_error", "Not Found"))
                return Reply(
                    404,
                    openai_error(
                        f"Invalid URL ({self.command} {self.path})", "invalid_request_error", None
                    ),
                )
            if not isinstance(body, dict):
                if is_anthropic:
                    return Reply(400, anthropic_error("invalid_request_error", "invalid JSON body"))
                return Reply(
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
            input_tokens = estimate_tokens(size)
            if api == "count_tokens":
                return Reply(200, {"input_tokens": input_tokens})
            if api == "anthropic":
                conv = anthropic_conversation(body)
                d = decide(conv)
                rec.reply = decision_summary(d)
                return anthropic_reply(name, d, input_tokens, bool(body.get("stream")))
            if api == "chat":
                d = decide(chat_conversation(body))
                rec.reply = decision_summary(d)
                return chat_reply(name, d, body, input_tokens)
            history = standin._history(body.get("previous_response_id"))
            d = decide(responses_conversation(body, history))
            rec.reply = decision_summary(d)
            reply, rid, items = responses_reply(name, d, body, input_tokens)
            standin._remember_response(rid, [*history, *input_items(body), *items])
            return reply

        def _refuse(self, name: str, anthropic: bool) -> Reply:
            if anthropic:
                return Reply(404, anthropic_error("not_found_error", f"model: {name}"))
            return Reply(
                404,
                openai_error(
                    f"The model `{name}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    "model_not_found",
                ),
            )

        def _send(self, reply: Reply, anthropic: bool) -> None:
            request_id = new_id("req_")
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
