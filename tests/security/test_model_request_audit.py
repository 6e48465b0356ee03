"""Attacks on the record of model requests by someone with SQL access but not the audit key:
lower a request's tokens or cost (to hide spend), swap its body hash (to hide what the agent
was told), delete its row, forge a row, or delete its audit entry. `inspect audit verify` must
fail and name the model request each time (gateway/verify.py, via approvals.audit's registry)."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection

from approvals import audit
from approvals.models import AuditEntry
from gateway.metering import AUDIT_ACTION
from gateway.models import ModelRequest
from tests.gateway.metering_fixtures import (  # noqa: F401
    access,
    anthropic_exchange,
    record_committed,
    standin,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def metered(anthropic_exchange, record_committed):  # noqa: F811 - fixtures imported above
    """Three requests recorded as in production; the audit log verifies."""
    rows = [record_committed(anthropic_exchange(f"task {i}")) for i in range(3)]
    report = audit.verify()
    assert report.ok, report.problems
    assert "3 model requests checked against their audit entries" in report.notes
    return rows


def _sql(sql: str, params: list) -> None:
    """Behind the application's back (the ORM is not the attacker's tool)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _verify_fails(inspect_cli) -> str:
    code, out, err = inspect_cli("audit", "verify")
    assert code == 1, out + err
    return err


def test_lowered_tokens_and_cost_are_caught(metered, inspect_cli):
    target = metered[1]
    _sql(
        "UPDATE gateway_modelrequest SET output_tokens = 1, cost_usd = 0 WHERE id = %s",
        [target.pk],
    )
    err = _verify_fails(inspect_cli)
    assert f"model request {target.pk} was altered" in err
    assert f"output_tokens is {target.output_tokens} in the audit log, 1 in the database" in err
    assert f"cost_usd is {target.cost_usd!r} in the audit log, 0.0 in the database" in err
    # The others are fine and not named.
    assert f"model request {metered[0].pk} " not in err


def test_a_swapped_body_hash_is_caught(metered, inspect_cli):
    target = metered[0]
    forged = b'{"content": [{"type": "text", "text": "nothing to see"}]}'
    _sql(
        "UPDATE gateway_modelrequest SET response_sha256 = %s, response_bytes = %s WHERE id = %s",
        [hashlib.sha256(forged).hexdigest(), len(forged), target.pk],
    )
    _sql(
        "UPDATE gateway_modelrequestbody SET response_body = %s WHERE request_id = %s",
        [forged.decode(), target.pk],
    )
    err = _verify_fails(inspect_cli)
    assert f"model request {target.pk} was altered" in err
    assert f"response_sha256 is '{target.response_sha256}' in the audit log" in err
    assert "response_bytes is" in err


def test_a_deleted_request_row_is_caught(metered, inspect_cli):
    target = metered[2]
    _sql("DELETE FROM gateway_modelrequestbody WHERE request_id = %s", [target.pk])
    _sql("DELETE FROM gateway_modelrequest WHERE id = %s", [target.pk])
    err = _verify_fails(inspect_cli)
    assert f"model request {target.pk} is missing (deleted)" in err


FORGE = (
    "INSERT INTO gateway_modelrequest (runtime, provider, endpoint, model, stream, status, "
    "outcome, message, input_tokens, output_tokens, cached_tokens, latency_ms, request_sha256, "
    "response_sha256, request_bytes, response_bytes, created_at) VALUES ('codex', 'openai', "
    "'responses', 'gpt-5', false, 200, 'ok', '', 1, 1, 0, 1, '', '', 0, 0, CURRENT_TIMESTAMP)"
)


def test_a_forged_request_row_is_caught(metered, inspect_cli):
    _sql(FORGE, [])
    forged = ModelRequest.objects.order_by("-pk").first()
    err = _verify_fails(inspect_cli)
    assert f"model request {forged.pk} has no audit entry" in err

    # Many: the first twenty are named, then how many more.
    for _ in range(29):
        _sql(FORGE, [])
    err = _verify_fails(inspect_cli)
    assert err.count("has no audit entry") == 20
    assert "10 more model requests have no audit entry" in err


def test_a_deleted_audit_entry_is_caught_and_its_request_named(metered, inspect_cli):
    target = metered[1]
    entry = AuditEntry.objects.get(action=AUDIT_ACTION, object_id=str(target.pk))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE approvals_auditentry DISABLE TRIGGER USER")
        cursor.execute("DELETE FROM approvals_auditentry WHERE id = %s", [entry.pk])
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE approvals_auditentry ENABLE TRIGGER USER")
    err = _verify_fails(inspect_cli)
    assert f"audit entry seq {entry.seq}: missing (removed)" in err
    assert f"model request {target.pk} has no audit entry" in err


def test_a_verifier_that_crashes_fails_verification(metered, monkeypatch):
    def broken(report):
        raise RuntimeError("database gone")

    monkeypatch.setitem(audit._verifiers, "model requests", broken)
    report = audit.verify()
    assert not report.ok
    assert "the model requests check could not run: RuntimeError: database gone" in str(
        report.problems
    )


def test_deleting_the_session_through_the_app_is_not_tampering(metered, inspect_cli):
    """Spend is history: a deleted session's requests stay, and still match their entries."""
    session = metered[0].session
    session.delete()
    assert ModelRequest.objects.filter(session__isnull=True).count() == 3
    code, out, err = inspect_cli("audit", "verify")
    assert code == 0, out + err
