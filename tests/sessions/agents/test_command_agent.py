"""The `command` agent gets the prompt in $INSPECT_PROMPT and on stdin; its output lines are
events, and JSON lines in the built-in event shape are parsed as such."""

import json

from sessions.agents.command import CommandAgent, parse_event_line
from tests.sessions.agents.conftest import make_turn, of_kind


def test_the_prompt_arrives_on_stdin_and_in_the_environment(sandbox):
    agent = CommandAgent('read -r line; echo "stdin: $line"; echo "env: $INSPECT_PROMPT"')
    events = list(agent.run(make_turn(sandbox, 'it\'s a "quoted" $HOME prompt')))
    assert [o["text"] for o in of_kind(events, "output")] == [
        'stdin: it\'s a "quoted" $HOME prompt',
        'env: it\'s a "quoted" $HOME prompt',
    ]
    assert events[-1].data == {"exit_code": 0}


def test_json_lines_in_the_event_shape_become_typed_events(sandbox):
    script = (
        'echo \'{"kind": "message", "data": {"text": "planning"}}\'; '
        'echo \'{"kind": "usage", "data": {"input_tokens": 10, "output_tokens": 2}}\'; '
        'echo \'{"kind": "file_edit", "data": {"path": "a.txt"}}\'; '
        'echo \'{"kind": "done", "data": {}}\'; '
        'echo \'{"not": "an event"}\'; echo plain'
    )
    events = list(CommandAgent(script).run(make_turn(sandbox)))
    assert [(e.kind, e.data) for e in events] == [
        ("message", {"text": "planning"}),
        ("usage", {"input_tokens": 10, "output_tokens": 2}),
        ("file_edit", {"path": "a.txt"}),
        ("output", {"stream": "stdout", "text": '{"kind": "done", "data": {}}'}),
        ("output", {"stream": "stdout", "text": '{"not": "an event"}'}),
        ("output", {"stream": "stdout", "text": "plain"}),
        ("done", {"exit_code": 0}),
    ]


def test_only_well_formed_event_lines_are_parsed():
    assert parse_event_line('{"kind": "error", "data": {"message": "x"}}').kind == "error"
    assert parse_event_line('{"kind": "message", "data": "text"}') is None
    assert parse_event_line('{"kind": "nonsense", "data": {}}') is None
    assert parse_event_line("{broken") is None
    assert parse_event_line("  {}") is None


def test_a_follow_up_sees_the_earlier_prompts_with_their_authors_and_the_agents_replies(sandbox):
    from sessions.agents.base import Author, Conversation

    conversation = Conversation()
    agent = CommandAgent(
        'echo "{\\"kind\\": \\"message\\", \\"data\\": {\\"text\\": \\"did: $INSPECT_PROMPT\\"}}"; '
        'cat "$INSPECT_CONVERSATION"'
    )
    list(agent.run(make_turn(sandbox, "create notes.txt", conversation=conversation)))
    grace = Author(username="grace", name="Grace Reviewer", email="grace@example.com")
    turn = make_turn(sandbox, "now undo that", conversation=conversation)
    turn.author = grace
    events = list(CommandAgent('cat "$INSPECT_CONVERSATION"').run(turn))
    lines = [json.loads(o["text"]) for o in of_kind(events, "output")]
    assert lines == [
        {"role": "user", "author": "engineer", "text": "create notes.txt"},
        {"role": "agent", "text": "did: create notes.txt"},
        {"role": "user", "author": "grace", "text": "now undo that"},
    ]
