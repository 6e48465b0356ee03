"""The session's model cost is what the gateway metered, whichever runtime asked: the runner no
longer adds a runtime's own report of its cost, and the end of a turn does not overwrite what
was metered while it ran (a real turn, a request metered mid-turn)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection

from gateway.metering import Exchange, record
from sessions import model_access
from sessions.models import Event, Prompt, Session

pytestmark = pytest.mark.django_db(transaction=True)

# A runtime reporting its own cost, as the built-in agent and the CLIs do, then working on.
REPORTED = {"model": "gpt-4.1", "input_tokens": 1000, "output_tokens": 50, "cost_usd": 0.5,
            "turn_cost_usd": 0.5}  # fmt: skip
AGENT = f"echo '{json.dumps({'kind': 'usage', 'data': REPORTED})}'; sleep 2; echo done"


def _meter_mid_turn(done: list, failed: list) -> None:
    """Once the runtime has reported its cost, meter a request of the running turn."""
    try:
        deadline = time.monotonic() + 60
        while not Event.objects.filter(kind="usage").exists():
            assert time.monotonic() < deadline, "the runtime never reported its usage"
            time.sleep(0.05)
        prompt = Prompt.objects.select_related("session").get(order=1)
        token = model_access.mint(prompt.session, prompt, "command")
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
    ready_repo, create_session
):
    done, failed = [], []
    meter = threading.Thread(target=_meter_mid_turn, args=(done, failed))
    meter.start()

    code, summary, err = create_session("--prompt", "work", "--agent-command", AGENT, "--inline")
    meter.join(60)

    assert code == 0 and summary["state"] == "idle", err
    assert not failed, failed
    (metered,) = done
    # The runtime's own report stays in its usage event ...
    usage = Event.objects.get(session_id=summary["id"], kind="usage").payload
    assert usage["turn_cost_usd"] == 0.5
    # ... but the session's cost is the meter's alone, and the turn's end kept it.
    session = Session.objects.get(pk=summary["id"])
    assert session.cost_usd == pytest.approx(metered.cost_usd)
    # 5,000 uncached at $3, 15,000 cached at 10% of that, 1,000 out at $15 (per million).
    assert metered.cost_usd == pytest.approx(0.015 + 0.0045 + 0.015)
    assert Event.objects.filter(session_id=session.pk, kind="model_request").count() == 1
