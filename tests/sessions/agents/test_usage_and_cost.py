"""Every model call is recorded with its tokens, and its cost in USD where the price is known."""

import subprocess
import sys

import pytest

from inspect_web.pricing import parse_prices
from sessions.agents import pricing
from tests.sessions.agents.conftest import (
    chat_message,
    chat_tool_calls,
    make_turn,
    of_kind,
    openai_agent,
    run,
)


def test_usage_events_carry_tokens_cost_and_running_totals(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("read_file", {"path": "README.md"}), prompt_tokens=1200,
                        completion_tokens=30),
        chat_message("done", prompt_tokens=1500, completion_tokens=70),
    )  # fmt: skip
    events = run(openai_agent(fake_model, model="gpt-4.1"), make_turn(sandbox))
    first, second = of_kind(events, "usage")
    # gpt-4.1: $2 per million input tokens, $8 per million output tokens.
    assert first == {
        "provider": "openai",
        "model": "gpt-4.1",
        "step": 1,
        "input_tokens": 1200,
        "output_tokens": 30,
        "cost_usd": 0.00264,
        "turn_input_tokens": 1200,
        "turn_output_tokens": 30,
        "turn_cost_usd": 0.00264,
    }
    assert second["cost_usd"] == 0.00356
    assert (second["turn_input_tokens"], second["turn_output_tokens"]) == (2700, 100)
    assert second["turn_cost_usd"] == pytest.approx(0.0062)
    done = events[-1].data
    assert (done["input_tokens"], done["output_tokens"], done["steps"]) == (2700, 100, 2)
    assert done["cost_usd"] == pytest.approx(0.0062)


def test_a_model_without_a_known_price_reports_tokens_and_no_cost(fake_model, sandbox):
    fake_model.push(chat_message("hi", model="llama3.1:8b"))
    events = run(openai_agent(fake_model, model="llama3.1:8b"), make_turn(sandbox))
    usage = of_kind(events, "usage")[0]
    assert (usage["model"], usage["input_tokens"], usage["cost_usd"]) == ("llama3.1:8b", 1000, None)
    assert events[-1].data["cost_usd"] is None


def test_configured_prices_add_models_and_override_the_table(fake_model, sandbox):
    prices = parse_prices("llama3.1:8b=0.5/1, gpt-4.1=1/1")
    fake_model.push(chat_message("hi", model="llama3.1:8b", completion_tokens=1000))
    events = run(openai_agent(fake_model, model="llama3.1:8b", prices=prices), make_turn(sandbox))
    assert of_kind(events, "usage")[0]["cost_usd"] == 0.0015
    assert pricing.cost_usd("gpt-4.1", 1_000_000, 0, prices) == 1.0


def test_dated_and_gateway_model_names_find_their_price():
    assert pricing.price_of("gpt-4.1-mini-2025-04-14") == (0.40, 1.60)
    assert pricing.price_of("openai/gpt-4.1") == (2.00, 8.00)
    assert pricing.price_of("claude-sonnet-4-5-20250929") == (3.00, 15.00)
    assert pricing.price_of("gpt-4.10") is None


def test_a_malformed_price_setting_stops_start_up_naming_the_variable(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import django, os; django.setup()"],
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "inspect_web.settings",
            "INSPECT_DATA_DIR": str(tmp_path),
            "INSPECT_LLM_PRICES": "gpt-4.1=two/eight",
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "INSPECT_LLM_PRICES: 'gpt-4.1=two/eight' is not MODEL=INPUT/OUTPUT" in result.stderr
