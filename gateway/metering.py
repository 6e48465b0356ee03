"""Recording one model request once it ended: the ModelRequest row (tokens, cost from the price
table, latency, status, body hashes and sizes), its scrubbed bodies, an audit entry and a usage
event in the session's log, and the session's cost, all in one transaction: all or nothing.

The gateway calls `record` in a thread after every request it answered, refusals and errors
included (docs/model-gateway.md, "Metering and audit"). The audit entry is what `audit verify`
checks each ModelRequest row against (gateway/verify.py).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from approvals import audit
from gateway.models import ModelRequest, ModelRequestBody
from gateway.scrub import scrub_bytes, scrubber
from sessions.agents.pricing import cost_usd
from sessions.events import append_event
from sessions.models import ModelAccess, Prompt, Session
from sessions.totals import totals_changed

log = logging.getLogger(__name__)

AUDIT_ACTION = "gateway.model_request"
# What the audit entry holds of its ModelRequest row, compared field by field by the verifier.
AUDITED_FIELDS = (
    "runtime", "provider", "endpoint", "model", "stream", "status", "outcome",
    "input_tokens", "output_tokens", "cached_tokens", "cost_usd", "request_sha256",
    "response_sha256", "request_bytes", "response_bytes",
)  # fmt: skip

# PostgreSQL ended the transaction to break a deadlock, or to keep it serialisable: nothing of
# it was written, so it is tried again. (The audit chain's head is locked before the session's
# row by some writers, as by approvals.gate, and after it by others, as here.)
RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})
# The connection went away (the database restarted, an idle connection was cut): a new one is
# opened and, unless the lost transaction had in fact committed, it is tried again.
CONNECTION_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})
ATTEMPTS = 3
_turns: dict[int, int | None] = {}  # prompt id -> its order (a prompt never changes order)


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


def request_cost(model: str, counts: dict[str, int]) -> float | None:
    """What a request cost in USD (None: its model is not in the price table). A request that
    used no tokens (refused, failed, a model listing) cost nothing, priced or not."""
    if counts["input_tokens"] == 0 and counts["output_tokens"] == 0:
        return 0.0
    return cost_usd(
        model,
        counts["input_tokens"],
        counts["output_tokens"],
        settings.LLM_PRICES,
        cached_tokens=counts["cached_tokens"],
    )


def stored_text(body: bytes) -> str:
    """A body as the database keeps it: UTF-8 (undecodable bytes replaced), no NUL characters
    (PostgreSQL text cannot hold them)."""
    return body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def audit_data(row: ModelRequest) -> dict[str, Any]:
    """The audit entry's data for `row`: every AUDITED_FIELDS value."""
    return {name: getattr(row, name) for name in AUDITED_FIELDS}


def record(exchange: Exchange) -> ModelRequest:
    """Store one finished request (sync: the gateway calls it off its event loop). Raises if
    anything cannot be written, and then nothing is."""
    access = exchange.access
    counts = _counts(exchange)
    # Fixed before the first attempt: a retry finds by them a transaction that did commit.
    now, request_sha256 = timezone.now(), hashlib.sha256(exchange.request_body).hexdigest()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            # Both read the database (each cached): a lost connection shows here first.
            redactor, turn = scrubber(access.repository_id), _turn_of(access.prompt_id)
            texts = (
                stored_text(scrub_bytes(redactor, exchange.request_body)),
                stored_text(scrub_bytes(redactor, exchange.response_body)),
                redactor(exchange.message) if redactor else exchange.message,
            )
            return _write(exchange, counts, texts, turn, now, request_sha256)
        except (OperationalError, InterfaceError) as exc:
            sqlstate = getattr(exc.__cause__, "sqlstate", None)
            lost = (
                sqlstate is None
                or sqlstate.startswith("08")
                or sqlstate in CONNECTION_LOST_SQLSTATES
            )
            if (
                attempt == ATTEMPTS
                or connection.in_atomic_block
                or not (lost or sqlstate in RETRYABLE_SQLSTATES)
            ):
                raise
            log.warning("recording a model request: %s; trying again", exc)
            if lost:
                connection.close()  # the next query opens a new connection
            time.sleep(0.05 * attempt)
            stored = ModelRequest.objects.filter(
                access_id=access.pk, created_at=now, request_sha256=request_sha256
            ).first()
            if stored is not None:  # the reply to COMMIT was lost, not the transaction
                return stored
    raise AssertionError("unreachable")


def _turn_of(prompt_id: int) -> int | None:
    if prompt_id not in _turns:
        if len(_turns) > 10_000:
            _turns.clear()
        order = Prompt.objects.filter(pk=prompt_id).values_list("order", flat=True).first()
        _turns[prompt_id] = order
    return _turns[prompt_id]


def _write(
    exchange: Exchange,
    counts: dict[str, int],
    texts: tuple[str, str, str],
    turn: int | None,
    now: datetime,
    request_sha256: str,
) -> ModelRequest:
    """The one transaction of `record` (`texts`: the request body, the response body and the
    message, scrubbed)."""
    access = exchange.access
    with transaction.atomic():
        row = ModelRequest.objects.create(
            access=access,
            session_id=access.session_id,
            prompt_id=access.prompt_id,
            user_id=access.user_id,
            repository_id=access.repository_id,
            runtime=access.runtime,
            provider=_column(exchange.provider, "provider"),
            endpoint=_column(exchange.endpoint, "endpoint"),
            model=_column(exchange.model, "model"),
            stream=exchange.stream,
            status=exchange.status,
            outcome=exchange.outcome,
            message=_column(texts[2], "message"),
            cost_usd=request_cost(exchange.model, counts),
            **counts,
            latency_ms=exchange.latency_ms,
            first_byte_ms=exchange.first_byte_ms,
            request_sha256=request_sha256,
            response_sha256=exchange.response_sha256
            or hashlib.sha256(exchange.response_body).hexdigest(),
            request_bytes=len(exchange.request_body),
            response_bytes=exchange.response_size
            if exchange.response_size is not None
            else len(exchange.response_body),
            created_at=now,
        )
        if settings.GATEWAY_BODY_DAYS > 0:
            ModelRequestBody.objects.create(
                request=row,
                request_body=texts[0],
                response_body=texts[1],
                expires_at=now + timedelta(days=settings.GATEWAY_BODY_DAYS),
            )
        if row.cost_usd:
            Session.objects.filter(pk=access.session_id).update(
                cost_usd=F("cost_usd") + row.cost_usd
            )
            totals_changed([access.session_id])
        append_event(access.session_id, "model_request", _usage(row, turn))
        # Last: the audit log's head stays locked until this transaction commits.
        audit.record(
            AUDIT_ACTION,
            actor_kind=audit.AuditEntry.ActorKind.AGENT,
            repository=access.repository,
            session=access.session,
            object_type="model_request",
            object_id=row.pk,
            data={**audit_data(row), "turn": turn, "user_id": access.user_id},
        )
    return row


MAX_COUNT = 2**31 - 1  # what the token columns hold


def _counts(exchange: Exchange) -> dict[str, int]:
    """Token counts as stored: within what the columns hold, cached tokens part of the input
    tokens (an upstream's odd count never costs the record)."""
    given = min(max(int(exchange.input_tokens), 0), MAX_COUNT)
    return {
        "input_tokens": given,
        "output_tokens": min(max(int(exchange.output_tokens), 0), MAX_COUNT),
        "cached_tokens": min(max(int(exchange.cached_tokens), 0), given),
    }


def _column(value: str, name: str) -> str:
    """A name the runtime or the upstream chose (a model, say), as column `name` holds it: no
    NUL (PostgreSQL text cannot hold it), cut to the column's length."""
    limit = ModelRequest._meta.get_field(name).max_length
    text = str(value).replace("\x00", "")
    return text[:limit] if limit else text


def _usage(row: ModelRequest, turn: int | None) -> dict[str, Any]:
    return {
        "request": row.pk,
        "turn": turn,
        "runtime": row.runtime,
        "provider": row.provider,
        "endpoint": row.endpoint,
        "model": row.model,
        "status": row.status,
        "outcome": row.outcome,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "cached_tokens": row.cached_tokens,
        "cost_usd": row.cost_usd,
        "latency_ms": round(row.latency_ms, 1),
        "message": row.message,
    }
