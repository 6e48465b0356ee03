"""Fixtures of the gateway's tests."""

from tests.gateway.metering_fixtures import (  # noqa: F401 - metering: record, replay, retention
    access,
    agent_request,
    agent_session,
    anthropic_exchange,
    client_for,
    record_committed,
    secrets_key,
    standin,
)
