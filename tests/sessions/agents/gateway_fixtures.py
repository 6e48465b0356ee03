"""Fixtures for running agents as the platform does since the model gateway: the run's gateway
(tests/gateway/conftest.py) in front of the stand-in model, reached by the worker and by the
sandboxes' doors, each turn with its own token."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import UPSTREAM_KEY
from tests.sessions.agents.standin_sandbox import gateway_sandboxes


@pytest.fixture
def gateway_boxes(tmp_path, platform_clis, gateway, fresh_upstream, mint, settings):
    """Sandboxes with egress none that reach the stand-in model only through the gateway's
    door; `.turn_route(runtime)` mints a turn's token as the runner does. The platform's key
    (UPSTREAM_KEY) is configured for both providers, held by the gateway alone."""
    settings.ANTHROPIC_API_KEY = settings.LLM_API_KEY = UPSTREAM_KEY
    with gateway_sandboxes(tmp_path, platform_clis, gateway, fresh_upstream) as made:
        made.mint = mint
        yield made


@pytest.fixture
def platform_gateway(settings, monkeypatch):
    """`use(gateway)`: the platform (the worker's built-in agent, the sandboxes' doors) reaches
    `gateway` for this test."""
    from snapshots import backends

    def use(gateway) -> None:
        settings.GATEWAY_PORT = int(gateway.url.rsplit(":", 1)[1])
        settings.GATEWAY_SOCKET = str(gateway.socket_path)
        monkeypatch.setattr(backends, "_backends", {})  # built again with the door's socket

    return use
