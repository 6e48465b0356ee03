"""The built-in agent's tools really run in the sandbox and change its files."""

from tests.sessions.agents.conftest import (
    MODEL_KEY,
    WORKSPACE_FILES,
    chat_message,
    chat_tool_calls,
    make_turn,
    of_kind,
    openai_agent,
    run,
)


def test_the_agent_explores_edits_writes_runs_and_finishes(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("list_files", {"path": ".", "depth": 2})),
        chat_tool_calls(("read_file", {"path": "src/util.py", "start_line": 10, "end_line": 12})),
        chat_tool_calls(("search", {"pattern": "return .+ name", "glob": "*.py"})),
        chat_tool_calls(
            (
                "edit_file",
                {"path": "src/greet.py", "old_string": "'Hi '", "new_string": "'Hello, '"},
            ),
            ("write_file", {"path": "docs/usage.md", "content": "greet('Ada')\n"}),
        ),
        chat_tool_calls(("run_command", {"command": "sh check.sh; cat docs/usage.md"})),
        chat_tool_calls(("finish", {"summary": "greet now says Hello, and has a usage note"})),
    )
    events = run(openai_agent(fake_model), make_turn(sandbox))

    assert sandbox.read_file("src/greet.py") == b"def greet(name):\n    return 'Hello, ' + name\n"
    assert sandbox.read_file("docs/usage.md") == b"greet('Ada')\n"
    results = {r["name"]: r for r in of_kind(events, "tool_result")}
    assert all(r["ok"] for r in results.values()), results
    assert "src/greet.py" in results["list_files"]["output"]
    assert "docs" not in results["list_files"]["output"]  # listed before it was written
    assert results["read_file"]["output"].splitlines() == [
        "    10\tline 10",
        "    11\tline 11",
        "    12\tline 12",
        "… 88 more lines",
    ]
    assert results["search"]["output"] == "src/greet.py:2:    return 'Hi ' + name"
    assert results["run_command"]["exit_code"] == 0
    assert results["run_command"]["output"] == "the command exited with status 0\nok\ngreet('Ada')"
    assert of_kind(events, "file_edit") == [
        {"path": "src/greet.py", "action": "edit", "added": 1, "removed": 1,
         "tool_call": of_kind(events, "tool_call")[3]["id"]},
        {"path": "docs/usage.md", "action": "create", "added": 1, "removed": 0,
         "tool_call": of_kind(events, "tool_call")[4]["id"]},
    ]  # fmt: skip
    # The command's lines streamed live as output events, too.
    assert [o["text"] for o in of_kind(events, "output")] == ["ok", "greet('Ada')"]
    assert of_kind(events, "message")[-1] == {
        "text": "greet now says Hello, and has a usage note",
        "final": True,
    }
    assert events[-1].kind == "done" and events[-1].data["reason"] == "finished"


def test_the_model_gets_the_tools_the_instructions_and_every_tool_result(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("read_file", {"path": "README.md"})),
        chat_message("The README is one heading; nothing to change."),
    )
    events = run(openai_agent(fake_model), make_turn(sandbox, "look at the README"))

    first, second = fake_model.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == f"Bearer {MODEL_KEY}"
    assert first.body["model"] == "gpt-4.1"
    system, user = first.body["messages"]
    assert system["role"] == "system" and WORKSPACE_FILES["AGENTS.md"].strip() in system["content"]
    assert user == {
        "role": "user",
        "content": "Request from Ada Engineer (engineer):\n\nlook at the README",
    }
    names = [t["function"]["name"] for t in first.body["tools"]]
    assert names == [
        "list_files", "read_file", "search", "write_file", "edit_file", "run_command", "finish",
    ]  # fmt: skip
    assert all(t["type"] == "function" for t in first.body["tools"])
    call = second.body["messages"][2]["tool_calls"][0]
    assert second.body["messages"][3] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": "     1\t# widgets",
    }
    # A plain answer without tool calls ends the turn.
    assert events[-1].data["reason"] == "answered"
    assert of_kind(events, "message") == [{"text": "The README is one heading; nothing to change."}]


def test_search_runs_inside_the_sandbox_not_on_the_worker(fake_model, sandbox):
    # /etc/hostname inside a local sandbox says "sandbox"; the worker's says something else.
    fake_model.push(
        chat_tool_calls(("search", {"pattern": "^sandbox$", "path": "/etc/hostname"})),
        chat_message("done"),
    )
    events = run(openai_agent(fake_model), make_turn(sandbox))
    assert of_kind(events, "tool_result")[0]["output"] == "/etc/hostname:1:sandbox"


def test_file_tools_refuse_paths_outside_the_workspace_and_the_model_is_told(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("read_file", {"path": "../../etc/passwd"})),
        chat_tool_calls(("write_file", {"path": "/etc/evil", "content": "x"})),
        chat_tool_calls(("edit_file", {"path": "src/greet.py", "old_string": "nope",
                                       "new_string": "x"})),
        chat_message("giving up"),
    )  # fmt: skip
    events = run(openai_agent(fake_model), make_turn(sandbox))
    results = of_kind(events, "tool_result")
    assert [r["ok"] for r in results] == [False, False, False]
    assert "outside the sandbox workspace" in results[0]["output"]
    assert "outside the sandbox workspace" in results[1]["output"]
    assert "old_string was not found in src/greet.py" in results[2]["output"]
    told = [m for m in fake_model.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "outside the sandbox workspace" in told[0]["content"]


def test_an_ambiguous_edit_is_refused_until_it_is_unique_or_replace_all(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("edit_file", {"path": "src/util.py", "old_string": "line 1\n",
                                       "new_string": "LINE 1\n"})),
        chat_tool_calls(("edit_file", {"path": "src/util.py", "old_string": "line 1",
                                       "new_string": "LINE 1", "replace_all": True})),
        chat_message("done"),
    )  # fmt: skip
    events = run(openai_agent(fake_model), make_turn(sandbox))
    first, second = of_kind(events, "tool_result")
    # "line 1\n" is unique; "line 1" also starts lines 10-19 and 100.
    assert first["ok"] and first["output"] == "replaced 1 occurrence in src/util.py"
    assert second["ok"] and second["output"] == "replaced 11 occurrences in src/util.py"
    text = sandbox.read_file("src/util.py").decode()
    assert text.startswith("LINE 1\nline 2\n") and "LINE 10\n" in text and "LINE 100\n" in text
