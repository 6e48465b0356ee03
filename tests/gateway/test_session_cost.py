"""The session's model cost is what the gateway metered, whichever runtime asked: the runner no
longer adds a runtime's own report of its cost, and the end of a turn does not overwrite what
was metered while it ran (a real turn of the built-in agent, a request metered mid-turn)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from gateway.metering import Exchange, record
from sessions import model_access
from sessions.models import Event, Prompt, Session
from tests.sessions.agents.conftest import (  # noqa: F401
    MODEL_KEY,
    Reply,
    chat_tool_calls,
    fake_model,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _meter_mid_turn(fake, done: list, failed: list) -> None:
    """Once the agent has made its second model call, meter a request of the running turn."""
    try:
        deadline = time.monotonic() + 60
        while len(fake.requests) < 2:
            assert time.monotonic() < deadline, "the agent never made a second call"
            time.sleep(0.05)
        prompt = Prompt.objects.select_related("session").get(order=1)
        token = model_access.mint(prompt.session, prompt, "claude-code")
        done.append(
            record(
                Exchange(
                    access=model_access.active(token), provider="anthropic",
                    endpoint="messages", model="claude-sonnet-4-5", stream=True, status=200,
                    outcome="ok", request_body=b'{"model": "claude-sonnet-4-5"}',
                    response_body=b"event: message_stop\ndata: {}\n\n", input_tokens=20_000,
                    output_tokens=1_000, cached_tokens=15_000,
                )
            )
        )  # fmt: skip
    except Exception as exc:
        failed.append(exc)
    finally:
        connection.close()


def test_the_session_costs_what_was_metered_not_what_the_runtime_reported(
    ready_repo,
    create_session,
    settings,
    fake_model,  # noqa: F811 - the fixture imported above
):
    settings.LLM_PROVIDER, settings.LLM_MODEL = "openai", "gpt-4.1"
    settings.LLM_BASE_URL, settings.LLM_API_KEY = fake_model.url + "/v1", MODEL_KEY
    settings.LLM_RETRIES = 1
    fake_model.push(
        chat_tool_calls(("list_files", {})),
        # Slow, so the metered request lands while the turn still runs.
        Reply(chat_tool_calls(("finish", {"summary": "Looked around."})), delay=1.0),
    )
    done, failed = [], []
    meter = threading.Thread(target=_meter_mid_turn, args=(fake_model, done, failed))
    meter.start()

    code, summary, err = create_session("--prompt", "look around", "--agent", "builtin", "--inline")
    meter.join(60)

    assert code == 0 and summary["state"] == "idle", err
    assert not failed, failed
    (metered,) = done
    # The built-in agent reported its own cost (2 calls of gpt-4.1) in its usage events ...
    usage = Event.objects.filter(session_id=summary["id"], kind="usage").latest("seq").payload
    assert usage["turn_cost_usd"] == pytest.approx(2 * 0.0024)
    # ... but the session's cost is the meter's alone, and the turn's end kept it.
    session = Session.objects.get(pk=summary["id"])
    assert session.cost_usd == pytest.approx(metered.cost_usd)
    # 5,000 uncached at $3, 15,000 cached at 10% of that, 1,000 out at $15 (per million).
    assert metered.cost_usd == pytest.approx(0.015 + 0.0045 + 0.015)
    assert Event.objects.filter(session_id=session.pk, kind="model_request").count() == 1
