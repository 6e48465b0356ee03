"""While the drift sync runs the agent may read and search, but its writes wait for the sync."""

import threading
import time

from tests.sessions.agents.conftest import (
    chat_message,
    chat_tool_calls,
    make_turn,
    openai_agent,
    timed,
)

SYNC_SECONDS = 1.5


def test_reads_and_searches_go_ahead_and_an_edit_waits_until_the_sync_is_done(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("read_file", {"path": "src/greet.py"})),
        chat_tool_calls(("search", {"pattern": "Hi"}), ("list_files", {})),
        chat_tool_calls(
            ("edit_file", {"path": "src/greet.py", "old_string": "Hi ", "new_string": "Hello, "})
        ),
        chat_tool_calls(("run_command", {"command": "cat src/greet.py"})),
        chat_message("done"),
    )
    synced = threading.Event()
    synced_at: list[float] = []

    def finish_sync() -> None:
        time.sleep(SYNC_SECONDS)
        synced_at.append(time.monotonic())
        synced.set()

    started = time.monotonic()
    threading.Thread(target=finish_sync).start()
    events = timed(openai_agent(fake_model), make_turn(sandbox, sync_done=synced))

    results = [(at, e.data) for at, e in events if e.kind == "tool_result"]
    by_name = {data["name"]: (at, data) for at, data in results}
    for name in ("read_file", "search", "list_files"):
        at, data = by_name[name]
        assert at < synced_at[0], f"{name} waited for the sync"
        assert "waited_for_sync_ms" not in data
    edit_at, edit = by_name["edit_file"]
    assert edit_at >= synced_at[0] and edit["ok"]
    assert edit["waited_for_sync_ms"] >= (synced_at[0] - started - 1.0) * 1000 * 0.5
    waiting = [e.data["text"] for _, e in events if e.kind == "output"]
    assert "edit_file waits for the workspace sync to finish" in waiting
    # Once synced, nothing waits any more.
    assert "waited_for_sync_ms" not in by_name["run_command"][1]
    assert sandbox.read_file("src/greet.py") == b"def greet(name):\n    return 'Hello, ' + name\n"


def test_a_stop_while_an_edit_waits_for_the_sync_ends_the_turn(fake_model, sandbox):
    fake_model.push(chat_tool_calls(("write_file", {"path": "x.txt", "content": "x"})))
    agent = openai_agent(fake_model)
    threading.Timer(0.5, agent.stop).start()
    started = time.monotonic()
    events = [e for _, e in timed(agent, make_turn(sandbox, sync_done=threading.Event()))]
    assert time.monotonic() - started < 2
    assert events[-1].data["stopped"]
    assert not [e for e in events if e.kind == "tool_result"]
