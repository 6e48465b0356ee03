"""A turn that exceeds its step, token, cost or wall-time limit is stopped and reported, and
the work it did stays in the workspace."""

import time

from sessions.agents.base import TurnLimits
from tests.sessions.agents.conftest import chat_tool_calls, make_turn, of_kind, openai_agent, run


def endless_reads(fake, n=10, **usage):
    fake.push(*[chat_tool_calls(("read_file", {"path": "README.md"}), **usage) for _ in range(n)])


def test_the_step_limit_stops_the_turn_and_keeps_the_work(fake_model, sandbox):
    fake_model.push(chat_tool_calls(("write_file", {"path": "partial.txt", "content": "half\n"})))
    endless_reads(fake_model)
    events = run(openai_agent(fake_model), make_turn(sandbox, limits=TurnLimits(steps=3)))
    assert len(fake_model.requests) == 3
    error = of_kind(events, "error")[-1]
    assert error["limit"] == "steps"
    assert error["message"] == (
        "the turn reached its limit of 3 model steps; the work so far is kept; queue a "
        "follow-up prompt to continue"
    )
    assert events[-1].data["reason"] == "limit"
    assert sandbox.read_file("partial.txt") == b"half\n"


def test_the_token_limit_counts_input_and_output_tokens(fake_model, sandbox):
    endless_reads(fake_model, prompt_tokens=3000, completion_tokens=100)
    events = run(openai_agent(fake_model), make_turn(sandbox, limits=TurnLimits(tokens=6000)))
    assert len(fake_model.requests) == 2  # 3100, then 6200 >= 6000
    error = of_kind(events, "error")[-1]
    assert error["limit"] == "tokens" and "6,200 tokens, its limit is 6,000" in error["message"]


def test_the_cost_limit_uses_the_price_table(fake_model, sandbox):
    # gpt-4.1: 100k input tokens cost $0.20 a step.
    endless_reads(fake_model, prompt_tokens=100_000, completion_tokens=0)
    events = run(openai_agent(fake_model), make_turn(sandbox, limits=TurnLimits(cost_usd=0.5)))
    assert len(fake_model.requests) == 3
    error = of_kind(events, "error")[-1]
    assert error["limit"] == "cost"
    assert "cost $0.6000, its limit is $0.50" in error["message"]


def test_the_wall_time_limit_cuts_a_long_command_short(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("run_command", {"command": "echo begun; sleep 30", "timeout_seconds": 60}))
    )
    endless_reads(fake_model)
    started = time.monotonic()
    events = run(openai_agent(fake_model), make_turn(sandbox, limits=TurnLimits(wall_seconds=2)))
    assert time.monotonic() - started < 6
    result = of_kind(events, "tool_result")[0]
    assert result["timed_out"] and "timed out after 2 s and was killed" in result["output"]
    assert of_kind(events, "error")[-1]["limit"] == "wall_time"
