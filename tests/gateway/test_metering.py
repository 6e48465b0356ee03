"""Recording one model request (gateway.metering.record): the row, its scrubbed bodies, an audit
entry, a usage event in the session's log and the session's cost, in one transaction; on any
failure none of them. Exchanges are made of what the stand-in model really answered."""

from __future__ import annotations

import hashlib
import logging
import statistics
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction

from approvals import audit
from approvals.models import AuditEntry
from approvals.redaction import REDACTED
from approvals.secrets import secret_set
from gateway import metering
from gateway.metering import AUDIT_ACTION, record
from gateway.models import ModelRequest, ModelRequestBody
from sessions.agents.pricing import cost_usd
from sessions.events import append_event
from sessions.models import Event, Session
from tests.conftest import test_database_url

pytestmark = pytest.mark.django_db

MILLION = 1_000_000


def _written(session_id: int) -> dict[str, int]:
    return {
        "requests": ModelRequest.objects.count(),
        "bodies": ModelRequestBody.objects.count(),
        "audit": AuditEntry.objects.filter(action=AUDIT_ACTION).count(),
        "events": Event.objects.filter(session_id=session_id, kind="model_request").count(),
    }


def test_a_request_is_recorded_whole(anthropic_exchange, agent_session, settings):
    settings.GATEWAY_BODY_DAYS = 7
    exchange = anthropic_exchange()
    assert exchange.status == 200 and exchange.input_tokens > 10 and exchange.output_tokens > 0

    row = record(exchange)

    row.refresh_from_db()
    assert (row.session_id, row.prompt_id, row.user_id, row.repository_id) == (
        agent_session.pk, agent_session.prompt.pk, agent_session.creator_id,
        agent_session.repository_id,
    )  # fmt: skip
    assert (row.runtime, row.provider, row.endpoint, row.model, row.status, row.outcome) == (
        "claude-code", "anthropic", "messages", "claude-sonnet-4-5", 200, "ok",
    )  # fmt: skip
    expected_cost = cost_usd("claude-sonnet-4-5", exchange.input_tokens, exchange.output_tokens)
    assert row.cost_usd == expected_cost and row.cost_usd > 0
    assert row.request_sha256 == hashlib.sha256(exchange.request_body).hexdigest()
    assert row.response_sha256 == hashlib.sha256(exchange.response_body).hexdigest()
    assert (row.request_bytes, row.response_bytes) == (
        len(exchange.request_body), len(exchange.response_body),
    )  # fmt: skip

    body = ModelRequestBody.objects.get(request=row)
    assert body.request_body == exchange.request_body.decode()
    assert body.response_body == exchange.response_body.decode()
    assert body.expires_at == row.created_at + timedelta(days=7)

    entry = AuditEntry.objects.get(action=AUDIT_ACTION)
    assert (entry.object_type, entry.object_id, entry.session_id) == (
        "model_request", str(row.pk), agent_session.pk,
    )  # fmt: skip
    assert entry.actor_kind == "agent" and entry.repository_name == "widgets"
    assert entry.data == {**metering.audit_data(row), "turn": 1, "user_id": row.user_id}
    assert entry.data["request_sha256"] == row.request_sha256

    event = Event.objects.get(session=agent_session, kind="model_request")
    assert event.payload == {
        "request": row.pk, "turn": 1, "runtime": "claude-code", "provider": "anthropic",
        "endpoint": "messages", "model": "claude-sonnet-4-5", "status": 200, "outcome": "ok",
        "input_tokens": row.input_tokens, "output_tokens": row.output_tokens,
        "cached_tokens": 0, "cost_usd": expected_cost, "latency_ms": 12.5, "message": "",
    }  # fmt: skip

    second = record(anthropic_exchange("append second line to notes.txt"))
    session = Session.objects.get(pk=agent_session.pk)
    assert session.cost_usd == pytest.approx(row.cost_usd + second.cost_usd)
    assert _written(agent_session.pk) == {"requests": 2, "bodies": 2, "audit": 2, "events": 2}


def test_a_failure_anywhere_writes_nothing(anthropic_exchange, agent_session, monkeypatch):
    exchange = anthropic_exchange()

    def audit_log_down(*args, **kwargs):
        raise RuntimeError("the audit log cannot be written")

    # The last write fails: the row, bodies, event and cost written before it go too.
    monkeypatch.setattr(metering.audit, "record", audit_log_down)
    with pytest.raises(RuntimeError, match="audit log"):
        record(exchange)
    monkeypatch.undo()
    assert _written(agent_session.pk) == {"requests": 0, "bodies": 0, "audit": 0, "events": 0}
    assert Session.objects.get(pk=agent_session.pk).cost_usd == 0

    # The session was deleted while its request ran: nothing is left pointing at it.
    gone = agent_session.pk
    Session.objects.filter(pk=gone).delete()
    with pytest.raises(Session.DoesNotExist):
        record(exchange)
    assert _written(gone) == {"requests": 0, "bodies": 0, "audit": 0, "events": 0}


def test_odd_values_from_a_runtime_or_upstream_never_cost_the_record(
    anthropic_exchange, agent_session, team, secrets_key
):
    secret = "upstream-" + "Kx7" * 8
    secret_set(repository=team.repository, name="API_TOKEN", value=secret, by=team.admin)
    row = record(
        anthropic_exchange(
            model="claude-\x00" + "x" * 500, input_tokens=2**40, output_tokens=-5,
            cached_tokens=2**41, status=400, outcome="bad_request",
            message=f"model not found; your request said token {secret}",
        )
    )  # fmt: skip
    row.refresh_from_db()
    assert row.model == "claude-" + "x" * 193 and len(row.model) == 200
    assert (row.input_tokens, row.output_tokens, row.cached_tokens) == (2**31 - 1, 0, 2**31 - 1)
    assert secret not in row.message and REDACTED in row.message
    event = Event.objects.get(session=agent_session, kind="model_request")
    assert event.payload["model"] == row.model and secret not in event.payload["message"]


def test_cost_counts_cached_tokens_at_the_providers_discount(anthropic_exchange, agent_session):
    row = record(
        anthropic_exchange(input_tokens=MILLION, cached_tokens=400_000, output_tokens=100_000)
    )
    # claude-sonnet-4: $3 in, $15 out per million; a cache read is 10% of an input token.
    assert row.cost_usd == pytest.approx(600_000 * 3 / MILLION + 400_000 * 0.3 / MILLION + 1.5)
    assert cost_usd("gpt-4.1", MILLION, 0, cached_tokens=MILLION) == pytest.approx(0.5)
    # A model whose discount is unknown pays full price for cached tokens: never under-counted.
    extra = {"house-model": (1.0, 2.0)}
    assert cost_usd("house-model", MILLION, 0, extra, cached_tokens=MILLION) == 1.0
    # More cached than input (a runtime's miscount) is clamped to the input.
    assert cost_usd("gpt-4.1", 100, 0, cached_tokens=10_000) == cost_usd(
        "gpt-4.1", 100, 0, cached_tokens=100
    )
    assert Session.objects.get(pk=agent_session.pk).cost_usd == pytest.approx(row.cost_usd)


def test_an_unpriced_model_costs_none_and_a_refusal_nothing(anthropic_exchange, agent_session):
    unpriced = record(anthropic_exchange(model="llama3.1:8b"))
    assert unpriced.cost_usd is None and unpriced.input_tokens > 0
    event = Event.objects.get(session=agent_session, kind="model_request")
    assert event.payload["cost_usd"] is None

    refused = record(
        anthropic_exchange(
            model="claude-opus-4", status=429, outcome="refused_budget", input_tokens=0,
            output_tokens=0, response_body=b'{"type":"error"}',
            message="the daily budget of widgets is spent ($0.00 left); a site admin can raise it",
        )
    )  # fmt: skip
    assert refused.cost_usd == 0.0
    payload = Event.objects.filter(kind="model_request").latest("seq").payload
    assert payload["outcome"] == "refused_budget" and "daily budget" in payload["message"]
    assert Session.objects.get(pk=agent_session.pk).cost_usd == 0


def test_secrets_are_scrubbed_from_the_stored_bodies(
    anthropic_exchange, agent_session, team, secrets_key
):
    secret = "deploy-" + "Zq8" * 8
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=secret, by=team.admin)
    exchange = anthropic_exchange(f"run ./deploy --token {secret}")
    assert secret.encode() in exchange.request_body

    row = record(exchange)

    body = ModelRequestBody.objects.get(request=row)
    assert secret not in body.request_body and REDACTED in body.request_body
    assert secret not in str(AuditEntry.objects.get(action=AUDIT_ACTION).data)
    # The hash is of what was exchanged; the stored text is what may be read.
    assert row.request_sha256 == hashlib.sha256(exchange.request_body).hexdigest()


def test_no_bodies_are_kept_when_the_days_are_zero(anthropic_exchange, settings):
    settings.GATEWAY_BODY_DAYS = 0
    row = record(anthropic_exchange())
    assert not ModelRequestBody.objects.filter(request=row).exists()
    assert AuditEntry.objects.filter(action=AUDIT_ACTION, object_id=str(row.pk)).exists()


def test_a_streamed_response_keeps_the_hash_and_size_of_the_whole(anthropic_exchange):
    whole = b"event: message_start\ndata: {}\n\n" * 1000
    row = record(
        anthropic_exchange(
            stream=True, response_body=whole[:512], response_truncated=True,
            response_sha256=hashlib.sha256(whole).hexdigest(), response_size=len(whole),
        )
    )  # fmt: skip
    assert (row.response_bytes, row.response_sha256) == (
        len(whole), hashlib.sha256(whole).hexdigest(),
    )  # fmt: skip
    assert ModelRequestBody.objects.get(request=row).response_body == whole[:512].decode()


@pytest.mark.django_db(transaction=True)
def test_record_takes_a_few_milliseconds(anthropic_exchange, agent_session):
    """Committed each time, as in production (the test's own transaction would hide COMMIT)."""
    exchange = anthropic_exchange()
    record(exchange)  # warm: the secrets and the session's repository are cached per process
    took = []
    for _ in range(60):
        started = time.perf_counter()
        record(exchange)
        took.append((time.perf_counter() - started) * 1000)
    p50 = statistics.median(took)
    p90 = statistics.quantiles(took, n=10)[-1]
    print(f"\nrecord(): p50 {p50:.2f} ms, p90 {p90:.2f} ms over {len(took)} requests")
    assert p50 < 100, took  # generous: the machine is shared; the figure is printed
    assert Event.objects.filter(session=agent_session, kind="model_request").count() == 61


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's deadlock detector")
@pytest.mark.django_db(transaction=True)
def test_a_deadlock_with_an_approval_is_tried_again(anthropic_exchange, agent_session, caplog):
    """approvals.gate appends to the audit log, then to the session's log, in one transaction;
    `record` locks them the other way round. PostgreSQL breaks the deadlock by ending one;
    when it is `record`'s, nothing of it was written and it is tried again."""
    exchange = anthropic_exchange()
    audited, go, failed = threading.Event(), threading.Event(), []

    def request_approval() -> None:
        try:
            with transaction.atomic():
                audit.record("approval.request", session=agent_session, data={"n": 1})
                audited.set()
                go.wait(10)
                time.sleep(0.3)  # record() is waiting for the audit log by now
                append_event(agent_session.pk, "notice", {"message": "waits for approval"})
        except Exception as exc:
            failed.append(exc)
        finally:
            connection.close()

    other = threading.Thread(target=request_approval)
    other.start()
    assert audited.wait(10)
    go.set()
    with caplog.at_level(logging.WARNING, logger="gateway.metering"):
        row = record(exchange)
    other.join(20)
    assert not failed, failed
    assert "deadlock detected" in caplog.text and "trying again" in caplog.text
    assert _written(agent_session.pk) == {"requests": 1, "bodies": 1, "audit": 1, "events": 1}
    assert Session.objects.get(pk=agent_session.pk).cost_usd == pytest.approx(row.cost_usd)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_terminate_backend")
@pytest.mark.django_db(transaction=True)
def test_a_connection_cut_by_the_database_is_opened_again(
    anthropic_exchange, agent_session, caplog
):
    """The gateway's recording thread keeps its connection between requests; if the database
    cut it meanwhile (a restart, an idle timeout), the request is still recorded, once."""
    exchange = anthropic_exchange()
    record(exchange)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    with psycopg.connect(test_database_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])

    with caplog.at_level(logging.WARNING, logger="gateway.metering"):
        row = record(exchange)
    assert "trying again" in caplog.text
    assert ModelRequest.objects.latest("pk") == row
    assert _written(agent_session.pk) == {"requests": 2, "bodies": 2, "audit": 2, "events": 2}
