"""Schemathesis runs every operation of /api/schema/ with a valid token: no 5xx, and every
response (status, content type, body) is what the schema documents. Positive and negative
(schema-violating) inputs; ids are pointed at real objects so the happy paths run too."""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import DataGenerationMethod, GenerationConfig
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
)


@pytest.fixture
def api_schema(db):
    from django.core import signals
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections
    from django.test import Client

    raw = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    # As Django's test client does: a request must not close the test's transaction.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)

    yield schemathesis.from_dict(
        raw,
        app=get_wsgi_application(),
        data_generation_methods=DataGenerationMethod.all(),
        # The token is ours to send; generating Authorization headers only tests 401s.
        generation_config=GenerationConfig(with_security_parameters=False),
    )
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


schema = schemathesis.from_pytest_fixture("api_schema")


@pytest.fixture
def world(team, token_for):
    """A session with events and a diff, and a pending approval, of the token's repository."""
    from approvals.gate import request_approval
    from sessions.events import append_event
    from sessions.models import Session

    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    append_event(session.pk, "output", {"line": "hello"})
    append_event(session.pk, "diff", {"path": "a.py", "added": 1, "removed": 0,
                                       "binary": False, "patch": "+x\n", "turn": 1})  # fmt: skip
    approval = request_approval(
        session=session, action="merge", payload={}, requested_by=team.engineer
    )
    return {"token": token_for(team.admin), "session": session.pk, "approval": approval.pk}


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.filter_too_much],
)  # fmt: skip
def test_the_api_conforms_to_its_schema(case, world):
    params = case.path_parameters or {}
    if "id" in params and isinstance(params["id"], int) and params["id"] % 2 == 0:
        params["id"] = world["approval" if "approvals" in case.path else "session"]
    if "name" in params and len(str(params["name"])) % 2 == 0:
        params["name"] = "widgets"
    # Raises CheckFailed on a 5xx or a response that does not match the schema.
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {world['token']}"}, checks=CHECKS
    )
    assert response.status_code < 500
