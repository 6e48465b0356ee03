"""Metering fixtures (imported by the tests that use them): a session with a turn's model
access, and exchanges made of what the stand-in model (tests/standin_model, the providers' real
wire formats) really answered."""

from __future__ import annotations

import json

import pytest

from gateway.metering import Exchange, record
from gateway.models import ModelRequest
from sessions import model_access
from sessions.models import ModelAccess
from tests.approvals.conftest import (  # noqa: F401
    agent_request,
    agent_session,
    client_for,
    secrets_key,
)
from tests.sessions.agents.standin_http import KEY, anthropic_body, call, user
from tests.standin_model import StandinModel


@pytest.fixture(scope="module")
def standin():
    with StandinModel(key=KEY) as server:
        yield server


@pytest.fixture
def access(agent_session) -> ModelAccess:  # noqa: F811 - the fixture imported above
    """The model access of the session's first turn, as the gateway looks it up."""
    token = model_access.mint(agent_session, agent_session.prompt, "claude-code")
    return model_access.active(token)


@pytest.fixture
def anthropic_exchange(standin, access):
    """Make one real Messages call to the stand-in and return the Exchange the gateway would
    hand to `record` for it (the text `said` in the prompt, the model `model`)."""

    def make(said: str = "create notes.txt with hello", **overrides) -> Exchange:
        body = anthropic_body([user(said)])
        status, raw, _ = call(standin, "/v1/messages", body, anthropic=True)
        usage = json.loads(raw)["usage"]
        fields = {
            "access": access,
            "provider": "anthropic",
            "endpoint": "messages",
            "model": body["model"],
            "stream": False,
            "status": status,
            "outcome": "ok",
            "request_body": json.dumps(body).encode(),
            "response_body": raw,
            "input_tokens": usage["input_tokens"] + usage.get("cache_read_input_tokens", 0),
            "output_tokens": usage["output_tokens"],
            "cached_tokens": usage.get("cache_read_input_tokens", 0),
            "latency_ms": 12.5,
            "first_byte_ms": 11.0,
        }
        return Exchange(**{**fields, **overrides})

    return make


@pytest.fixture
def record_committed(django_capture_on_commit_callbacks):
    """`record`, with what runs once its transaction commits run too (the audit head goes to
    the sink), as in production."""

    def run(exchange: Exchange) -> ModelRequest:
        with django_capture_on_commit_callbacks(execute=True):
            return record(exchange)

    return run
