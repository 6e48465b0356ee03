"""Stopping a turn ends it within 2 s, during a long tool call or a slow model request, and the
processes it started are gone."""

import threading
import time

from tests.sessions.agents.conftest import (
    Reply,
    chat_message,
    chat_tool_calls,
    make_turn,
    openai_agent,
)


def test_a_stop_during_a_long_command_ends_the_turn_within_2_s(fake_model, sandbox):
    fake_model.push(chat_tool_calls(("run_command", {"command": "echo begun; sleep 120"})))
    agent = openai_agent(fake_model)
    events, stopped_at = [], []
    for event in agent.run(make_turn(sandbox)):
        events.append(event)
        if event.kind == "output" and event.data["text"] == "begun":
            # The runner's stop-watcher thread does exactly this.
            threading.Thread(
                target=lambda: (stopped_at.append(time.monotonic()), agent.stop())
            ).start()
    took = time.monotonic() - stopped_at[0]
    assert took < 2, f"the turn took {took:.1f} s to stop"
    assert events[-1].kind == "done" and events[-1].data["stopped"] is True
    assert [e.kind for e in events].count("tool_result") == 0
    listing = sandbox.run("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
    assert "sleep 120" not in listing.stdout
    assert len(fake_model.requests) == 1  # nothing more was asked of the model


def test_a_stop_during_a_slow_model_request_ends_the_turn_within_2_s(fake_model, sandbox):
    fake_model.push(Reply(chat_message("too late"), delay=30))
    agent = openai_agent(fake_model)
    threading.Timer(0.5, agent.stop).start()
    started = time.monotonic()
    events = list(agent.run(make_turn(sandbox)))
    assert time.monotonic() - started < 2.5
    assert events[-1].data == {**events[-1].data, "stopped": True, "reason": "stopped"}
    assert [e.kind for e in events] == ["done"]


def test_a_stop_before_the_turn_starts_runs_nothing(fake_model, sandbox):
    agent = openai_agent(fake_model)
    agent.stop()
    events = list(agent.run(make_turn(sandbox)))
    assert [e.kind for e in events] == ["done"] and events[0].data["stopped"]
    assert fake_model.requests == []
