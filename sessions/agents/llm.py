"""Model APIs the built-in agent talks to, on the worker (never from inside the sandbox).

Two wire formats:

* OpenAI Chat Completions (`POST {base}/chat/completions` with `tools` / `tool_calls`), which
  hosted APIs, gateways and local servers (Ollama, vLLM, llama.cpp) all speak.
  https://platform.openai.com/docs/api-reference/chat/create
* Anthropic Messages (`POST {base}/v1/messages`, `x-api-key`, `anthropic-version`,
  `tool_use` / `tool_result` content blocks). https://docs.anthropic.com/en/api/messages

The agent keeps a neutral transcript (`Entry` dicts, below); each client turns it into its own
format. A client makes exactly one HTTP request per `send`; retries and backoff belong to the
agent, which can report them and give up when the turn is stopped.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from sessions.agents.base import Author, attributed

# A transcript entry is a JSON-able dict, one of:
#   {"role": "user", "text": str, "author": {"username": str, "name": str},   (author optional)
#    "images": [{"name": str, "media_type": str, "data": base64 str}, ...]}   (images optional)
#   {"role": "assistant", "text": str, "tool_calls": [{"id", "name", "arguments"}, ...]}
#   {"role": "tool", "call_id": str, "name": str, "content": str, "is_error": bool}
# A user entry's author is rendered with base.attributed; an image without "data" (a stored
# transcript keeps placeholders, not bytes) is rendered as a line of text saying it was there.
Entry = dict[str, Any]

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced; may be invalid


@dataclass
class ModelReply:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    stop_reason: str = ""


class ModelError(Exception):
    """The model API refused or failed a request. `message` quotes the API's own words."""

    def __init__(
        self, message: str, *, status: int | None = None, retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class ModelClient(ABC):
    provider: str
    model: str
    base_url: str

    @abstractmethod
    def send(
        self, system: str, transcript: list[Entry], tools: list[dict[str, Any]], *, timeout: float
    ) -> ModelReply:
        """One request; raises ModelError (retryable for 429/5xx/timeouts)."""

    def secrets(self) -> list[str]:
        """Values that must never be stored or reach the sandbox."""
        return []

    # -- HTTP, shared ---------------------------------------------------------------------
    def _post(self, url: str, body: dict[str, Any], headers: dict[str, str], timeout: float):
        where = f"the model API at {self.base_url}"
        if not url.startswith(("http://", "https://")):
            raise ModelError(f"{where}: the base URL must start with http:// or https://")
        # S310: the scheme was checked just above.
        data = json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method="POST")  # noqa: S310
        for key, value in {"content-type": "application/json", **headers}.items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            retry_after = _retry_after(exc.headers.get("retry-after"))
            detail = self._error_text(raw) or exc.reason or "no details"
            raise ModelError(
                f"{where} answered HTTP {exc.code}: {detail}",
                status=exc.code,
                retryable=exc.code in RETRYABLE_STATUS,
                retry_after=retry_after,
            ) from None
        except TimeoutError:
            raise ModelError(
                f"{where} did not answer within {timeout:.0f} s", retryable=True
            ) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise ModelError(
                    f"{where} did not answer within {timeout:.0f} s", retryable=True
                ) from None
            raise ModelError(f"cannot reach {where}: {exc.reason}", retryable=True) from None
        except (http.client.HTTPException, ConnectionError, OSError) as exc:
            raise ModelError(f"the connection to {where} broke: {exc}", retryable=True) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise ModelError(
                f"{where} answered with something that is not JSON: {raw[:300]!r}",
                retryable=False,
            ) from None

    @staticmethod
    def _error_text(raw: bytes) -> str:
        """The API's own error message, verbatim (both formats nest it under `error`)."""
        try:
            body = json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace").strip()[:1000]
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        return json.dumps(body)[:1000]


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def user_text(entry: Entry) -> str:
    """A user entry's text as the model is given it: who asked (when known) and a line for
    each image that is no longer sent (an earlier turn's)."""
    text = entry.get("text") or ""
    author = entry.get("author")
    if isinstance(author, dict) and (author.get("name") or author.get("username")):
        name, username = str(author.get("name") or ""), str(author.get("username") or "")
        text = attributed(text, Author(username=username, name=name or username, email=""))
    for image in entry.get("images") or []:
        if not image.get("data"):
            text += (
                f"\n[image {image.get('name')} ({image.get('media_type')}) was attached here; "
                "it is not sent again]"
            )
    return text


def sent_images(entry: Entry) -> list[dict[str, Any]]:
    """The images of a user entry whose bytes are sent (the current turn's)."""
    return [i for i in entry.get("images") or [] if i.get("data")]


def call_fields(call: Any) -> tuple[str, str, str]:
    """(id, name, arguments) of a stored tool call (a dict) or a ToolCall."""
    if isinstance(call, dict):
        return (
            str(call.get("id") or ""),
            str(call.get("name") or ""),
            str(call.get("arguments") or ""),
        )
    return call.id, call.name, call.arguments


class OpenAIChat(ModelClient):
    """An OpenAI-compatible Chat Completions endpoint; the key is optional (local servers)."""

    provider = "openai"

    def __init__(self, *, base_url: str, api_key: str, model: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model

    def secrets(self) -> list[str]:
        return [self.api_key] if self.api_key else []

    def send(
        self, system: str, transcript: list[Entry], tools: list[dict[str, Any]], *, timeout: float
    ) -> ModelReply:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *map(_openai_message, transcript)],
        }
        if tools:  # the API refuses an empty list (a summary request offers none)
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t["description"],
                        "parameters": t["parameters"],
                    },
                }
                for t in tools
            ]
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = self._post(f"{self.base_url}/chat/completions", body, headers, timeout)
        return _openai_reply(data, self.model)


def _openai_message(entry: Entry) -> dict[str, Any]:
    if entry["role"] == "user":
        images = sent_images(entry)
        if not images:
            return {"role": "user", "content": user_text(entry)}
        parts: list[dict[str, Any]] = [{"type": "text", "text": user_text(entry)}]
        parts += [
            {
                "type": "image_url",
                "image_url": {"url": f"data:{i['media_type']};base64,{i['data']}"},
            }
            for i in images
        ]
        return {"role": "user", "content": parts}
    if entry["role"] == "tool":
        return {"role": "tool", "tool_call_id": entry["call_id"], "content": entry["content"]}
    message: dict[str, Any] = {"role": "assistant", "content": entry.get("text") or None}
    if entry.get("tool_calls"):
        message["tool_calls"] = []
        for call in entry["tool_calls"]:
            id_, name, arguments = call_fields(call)
            message["tool_calls"].append(
                {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}
            )
    return message


def _openai_reply(data: Any, model: str) -> ModelReply:
    if not isinstance(data, dict):
        return ModelReply(model=model)
    usage = data.get("usage") or {}
    reply = ModelReply(
        model=str(data.get("model") or model),
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
    )
    choices = data.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return reply  # an empty reply: the agent reports it and asks again
    message = choices[0].get("message") or {}
    reply.stop_reason = str(choices[0].get("finish_reason") or "")
    content = message.get("content")
    if isinstance(content, list):  # some gateways return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    reply.text = (content or "").strip()
    # vLLM / DeepSeek / Ollama put a reasoning summary beside the content.
    reply.reasoning = str(message.get("reasoning_content") or message.get("reasoning") or "")
    for n, call in enumerate(message.get("tool_calls") or []):
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # a few servers send an object, not a string
            arguments = json.dumps(arguments) if arguments is not None else ""
        reply.tool_calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{n}"),
                name=str(function.get("name") or ""),
                arguments=arguments,
            )
        )
    return reply


class AnthropicMessages(ModelClient):
    provider = "anthropic"

    def __init__(
        self, *, api_key: str, model: str, base_url: str = "https://api.anthropic.com",
        max_tokens: int = 8192,
    ) -> None:  # fmt: skip
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.max_tokens = max_tokens

    def secrets(self) -> list[str]:
        return [self.api_key]

    def send(
        self, system: str, transcript: list[Entry], tools: list[dict[str, Any]], *, timeout: float
    ) -> ModelReply:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": _anthropic_messages(transcript),
        }
        if tools:
            body["tools"] = [
                {
                    "name": t["name"],
                    "description": t["description"],
                    "input_schema": t["parameters"],
                }
                for t in tools
            ]
        headers = {"x-api-key": self.api_key, "anthropic-version": ANTHROPIC_VERSION}
        data = self._post(f"{self.base_url}/v1/messages", body, headers, timeout)
        return _anthropic_reply(data, self.model)


def _anthropic_messages(transcript: list[Entry]) -> list[dict[str, Any]]:
    """Roles must alternate: tool results and a following user note share one user turn."""
    messages: list[dict[str, Any]] = []
    for entry in transcript:
        if entry["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if entry.get("text"):
                blocks.append({"type": "text", "text": entry["text"]})
            for call in entry.get("tool_calls") or []:
                id_, name, raw = call_fields(call)
                try:
                    arguments = json.loads(raw) if raw else {}
                except ValueError:
                    arguments = {}
                if not isinstance(arguments, dict):
                    arguments = {}
                blocks.append({"type": "tool_use", "id": id_, "name": name, "input": arguments})
            messages.append(
                {"role": "assistant", "content": blocks or [{"type": "text", "text": "…"}]}
            )
            continue
        if entry["role"] == "tool":
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": entry["call_id"],
                    "content": entry["content"],
                    "is_error": bool(entry.get("is_error")),
                }
            ]
        else:
            blocks = [{"type": "text", "text": user_text(entry)}]
            blocks += [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": i["media_type"], "data": i["data"]},
                }
                for i in sent_images(entry)
            ]
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": "user", "content": blocks})
    return messages


def _anthropic_reply(data: Any, model: str) -> ModelReply:
    if not isinstance(data, dict):
        return ModelReply(model=model)
    usage = data.get("usage") or {}
    reply = ModelReply(
        model=str(data.get("model") or model),
        # Cached prompt tokens are billed input too.
        input_tokens=_int(usage.get("input_tokens"))
        + _int(usage.get("cache_creation_input_tokens"))
        + _int(usage.get("cache_read_input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        stop_reason=str(data.get("stop_reason") or ""),
    )
    texts, thoughts = [], []
    for block in data.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(block.get("text") or "")
        elif block.get("type") == "thinking":
            thoughts.append(block.get("thinking") or "")
        elif block.get("type") == "tool_use":
            reply.tool_calls.append(
                ToolCall(
                    id=str(block.get("id") or ""),
                    name=str(block.get("name") or ""),
                    arguments=json.dumps(block.get("input") or {}),
                )
            )
    reply.text = "\n".join(t for t in texts if t).strip()
    reply.reasoning = "\n".join(t for t in thoughts if t).strip()
    return reply
