"""A provider key set on the Models page reaches the running gateway process on its next
requests, without a restart: the gateway reads its upstreams per request through the run-time
settings (a few seconds of caching, refreshed off its event loop)."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from gateway import provider_accounts
from tests.gateway.conftest import ANTHROPIC_HEADERS, anthropic_body
from tests.settings_area import provider_fixtures as fixtures
from tests.settings_area.provider_fixtures import GOOD_KEY, WRONG_KEY
from tests.standin_model import StandinModel

pytestmark = pytest.mark.django_db(transaction=True)
no_provider_env, site_admin = fixtures.no_provider_env, fixtures.site_admin
SECONDS = 6.0  # the settings' 2-second cache plus the gateway's 1-second refresh, with room


def _until(client, status: int) -> tuple[float, object]:
    """POST until the gateway answers `status`; (seconds it took, the last response)."""
    started = time.monotonic()
    while True:
        response = client.post(
            "/anthropic/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        if response.status_code == status or time.monotonic() - started > SECONDS:
            return time.monotonic() - started, response
        time.sleep(0.1)


def test_a_key_set_on_the_page_is_used_by_the_running_gateway_without_a_restart(
    no_provider_env, site_admin, start_gateway, mint
):
    with StandinModel(key=GOOD_KEY) as model:
        # Started with no provider in its environment: only the Models page can give one.
        gateway = start_gateway(
            anthropic="", openai="", ANTHROPIC_API_KEY="", INSPECT_LLM_API_KEY="",
            INSPECT_SECRETS_KEY=settings.SECRETS_KEY,
        )  # fmt: skip
        pid = gateway.process.pid
        token, _session = mint("claude-code")
        with gateway.client(token) as client:
            provider_accounts.provider_set(
                kind="anthropic", by=site_admin, key=WRONG_KEY, base_url=model.url
            )
            took, refused = _until(client, 401)
            assert refused.status_code == 401, refused.text
            assert refused.json()["error"]["message"] == "invalid x-api-key"  # the provider's
            assert model.requests[-1].headers["x-api-key"] == WRONG_KEY

            provider_accounts.provider_set(kind="anthropic", by=site_admin, key=GOOD_KEY)
            took, answered = _until(client, 200)
            assert answered.status_code == 200, answered.text
            assert answered.json()["type"] == "message"
            assert took < SECONDS
            assert model.requests[-1].headers["x-api-key"] == GOOD_KEY

            provider_accounts.provider_remove(kind="anthropic", by=site_admin)
            started, seen = time.monotonic(), len(model.requests)
            while len(model.requests) > seen or time.monotonic() - started < 0.2:
                seen = len(model.requests)  # until the gateway stops sending here
                assert time.monotonic() - started < SECONDS, "still sent to the removed provider"
                client.post(
                    "/anthropic/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
                )
            # Now towards Anthropic's own address, with no key (unreachable from here, or 401).
            assert len(model.requests) == seen
        assert gateway.process.poll() is None and gateway.process.pid == pid  # never restarted
        assert GOOD_KEY not in gateway.output() and WRONG_KEY not in gateway.output()
