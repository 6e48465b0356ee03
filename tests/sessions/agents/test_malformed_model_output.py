"""Malformed model output (invalid JSON arguments, an unknown tool, an empty reply) becomes an
error event, the model is told what was wrong, and the loop continues within its retry limit."""

from tests.sessions.agents.conftest import (
    chat_message,
    chat_tool_calls,
    make_turn,
    of_kind,
    openai_agent,
    run,
)


def test_each_kind_of_malformed_reply_is_reported_and_the_loop_recovers(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("read_file", '{"path": "README.md"')),  # truncated JSON
        chat_tool_calls(("delete_everything", {})),
        chat_message(None),  # neither text nor tool calls
        chat_tool_calls(("read_file", {"path": "README.md"})),
        chat_message("All good."),
    )
    events = run(openai_agent(fake_model, malformed_limit=3), make_turn(sandbox))

    errors = of_kind(events, "error")
    assert [e["malformed"] for e in errors] == [True, True, True]
    assert errors[0]["message"].startswith("the arguments of read_file are not valid JSON")
    assert errors[1]["message"].startswith("there is no tool named 'delete_everything'")
    assert errors[2]["message"] == "the model returned an empty reply"
    # The model was told each time, in the wire format it understands.
    second, third, fourth = fake_model.requests[1:4]
    assert second.body["messages"][-1]["role"] == "tool"
    assert "not valid JSON" in second.body["messages"][-1]["content"]
    assert "the tools are list_files, read_file" in third.body["messages"][-1]["content"]
    assert fourth.body["messages"][-1]["role"] == "user"
    assert "empty" in fourth.body["messages"][-1]["content"]
    assert of_kind(events, "tool_result")[-1]["ok"]
    assert events[-1].data["reason"] == "answered"


def test_too_many_malformed_replies_in_a_row_end_the_turn(fake_model, sandbox):
    fake_model.push(*[chat_tool_calls(("nope", {})) for _ in range(5)])
    events = run(openai_agent(fake_model, malformed_limit=2), make_turn(sandbox))
    assert len(fake_model.requests) == 3
    assert of_kind(events, "error")[-1]["message"] == (
        "the model sent 3 malformed replies in a row; the turn ends here (the work so far is kept)"
    )
    assert events[-1].data["reason"] == "malformed"


def test_arguments_of_the_wrong_type_are_explained_to_the_model(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("read_file", {"path": 42})),
        chat_tool_calls(("read_file", "[1, 2]")),
        chat_message("ok"),
    )
    events = run(openai_agent(fake_model), make_turn(sandbox))
    messages = [e["message"] for e in of_kind(events, "error")]
    assert messages == [
        "read_file: argument 'path' must be a str",
        "the arguments of read_file must be a JSON object",
    ]
