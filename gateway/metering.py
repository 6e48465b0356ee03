"""Recording one model request once it ended: the ModelRequest row (tokens, cost from the price
table, latency, status, body hashes and sizes), its scrubbed bodies, an audit entry and a usage
event in the session's log, all or nothing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings

from gateway.models import ModelRequest
from sessions.agents.pricing import cost_usd
from sessions.models import ModelAccess


@dataclass
class Exchange:
    """What the gateway saw of one request (bodies as forwarded and as returned, scrubbed)."""

    access: ModelAccess
    provider: str  # "anthropic" | "openai"
    endpoint: str  # "messages" | "count_tokens" | "chat.completions" | "responses" | "models"
    model: str
    stream: bool
    status: int
    outcome: str  # a ModelRequest.Outcome value
    request_body: bytes
    response_body: bytes
    message: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    latency_ms: float = 0.0
    first_byte_ms: float | None = None
    # A streamed response is hashed and sized as it passes; `response_body` then holds only
    # its head (at most what is kept for replay) and `response_truncated` says so.
    response_sha256: str | None = None
    response_size: int | None = None
    response_truncated: bool = False


def record(exchange: Exchange) -> ModelRequest:
    """Store one finished request (sync: the gateway calls it off its event loop)."""
    access = exchange.access
    return ModelRequest.objects.create(
        access=access,
        session_id=access.session_id,
        prompt_id=access.prompt_id,
        user_id=access.user_id,
        repository_id=access.repository_id,
        runtime=access.runtime,
        provider=exchange.provider,
        endpoint=exchange.endpoint,
        model=exchange.model,
        stream=exchange.stream,
        status=exchange.status,
        outcome=exchange.outcome,
        message=exchange.message,
        input_tokens=exchange.input_tokens,
        output_tokens=exchange.output_tokens,
        cached_tokens=exchange.cached_tokens,
        cost_usd=cost_usd(
            exchange.model, exchange.input_tokens, exchange.output_tokens, settings.LLM_PRICES
        ),
        latency_ms=exchange.latency_ms,
        first_byte_ms=exchange.first_byte_ms,
        request_sha256=hashlib.sha256(exchange.request_body).hexdigest(),
        response_sha256=exchange.response_sha256
        or hashlib.sha256(exchange.response_body).hexdigest(),
        request_bytes=len(exchange.request_body),
        response_bytes=exchange.response_size
        if exchange.response_size is not None
        else len(exchange.response_body),
    )
