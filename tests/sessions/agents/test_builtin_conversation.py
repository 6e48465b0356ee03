"""The built-in agent holds a conversation across a session's turns, against the stand-in model
over HTTP (both wire formats) in a real sandbox: each request carries the earlier turns (who
asked, what was answered, which tools ran), a follow-up by another person is attributed to
them, a transcript near the model's context is summarised, images reach the model, and a
refused model fails the turn with the provider's own words."""

from __future__ import annotations

import json

import pytest

from sessions.agents.base import Author, Conversation, Image
from sessions.agents.builtin import BuiltinAgent
from sessions.agents.llm import AnthropicMessages, OpenAIChat
from sessions.agents.transcript import SUMMARY_HEADER
from tests.sessions.agents.conftest import make_turn, of_kind, run
from tests.standin_model import TITLE, StandinModel

KEY = "sk-standin-conversation-test"
GRACE = Author(username="grace", name="Grace Hopper", email="grace@example.com")
ALAN = Author(username="alan", name="Alan Turing", email="alan@example.com")
# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


@pytest.fixture(scope="module")
def standin():
    with StandinModel(key=KEY) as server:
        yield server


@pytest.fixture(params=["openai", "anthropic"])
def api(request):
    return request.param


def agent(standin: StandinModel, api: str, *, model: str = "", **kwargs) -> BuiltinAgent:
    kwargs.setdefault("backoff_seconds", 0.01)
    if api == "openai":
        client = OpenAIChat(base_url=standin.openai_url, api_key=KEY, model=model or "gpt-4.1")
    else:
        client = AnthropicMessages(
            base_url=standin.url, api_key=KEY, model=model or "claude-sonnet-4-5"
        )
    return BuiltinAgent(client, **kwargs)


def turn_of(sandbox, prompt: str, author: Author, conversation: Conversation, **kwargs):
    return make_turn(sandbox, prompt, author=author, conversation=conversation, **kwargs)


def user_messages(body: dict) -> list:
    return [m for m in body["messages"] if m["role"] == "user"]


def test_each_turn_sends_the_earlier_turns_with_who_asked_and_the_tools_that_ran(
    standin, sandbox, api
):
    conversation = Conversation()
    standin.clear()
    first = run(
        agent(standin, api),
        turn_of(sandbox, "create notes.txt with hello", GRACE, conversation),
    )
    assert first[-1].data["reason"] == "answered"
    assert sandbox.read_file("notes.txt") == b"hello\n"
    # The stored transcript is plain JSON: prompt with author, the call, its result, the reply.
    stored = json.loads(json.dumps(conversation.messages))
    assert stored == conversation.messages
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0]["author"] == {"username": "grace", "name": "Grace Hopper"}
    assert stored[1]["tool_calls"][0]["name"] == "run_command"

    # Turn 2, by someone else, names no file: only turn 1 says which.
    standin.clear()
    second = run(
        agent(standin, api),
        turn_of(sandbox, "also append world to the file you created", ALAN, conversation),
    )
    assert second[-1].data["reason"] == "answered"
    assert sandbox.read_file("notes.txt") == b"hello\nworld\n"
    request = standin.model_requests()[0].text()
    assert "Request from Grace Hopper (grace):\\n\\ncreate notes.txt with hello" in request
    assert "'hello' > notes.txt" in request  # turn 1's tool call
    assert "Done: created notes.txt" in request  # and its answer
    assert "Request from Alan Turing (alan):\\n\\nalso append world" in request
    assert "newest one comes from Alan Turing (alan)" in request  # the system prompt
    # The newest user message is Alan's alone.
    newest = user_messages(standin.model_requests()[0].body)[-1]["content"]
    newest_text = newest if isinstance(newest, str) else newest[-1]["text"]
    assert newest_text.startswith("Request from Alan Turing (alan)")

    # Turn 3, by Alan again: undo what was just done (the append), from the history.
    run(agent(standin, api), turn_of(sandbox, "undo what you just did", ALAN, conversation))
    assert sandbox.read_file("notes.txt") == b"hello\n"
    assert standin.tool_calls()[-1] == "sed -i '$d' notes.txt"
    users = [m for m in conversation.messages if m["role"] == "user" and "author" in m]
    assert [u["author"]["username"] for u in users] == ["grace", "alan", "alan"]


def test_usage_names_the_model_its_tokens_and_cost(standin, sandbox, api):
    events = run(
        agent(standin, api),
        turn_of(sandbox, "create notes.txt with hello", GRACE, Conversation()),
    )
    usage = of_kind(events, "usage")
    assert len(usage) == 2
    for step in usage:
        assert step["model"].startswith(("gpt-4.1", "claude-sonnet-4-5"))
        assert step["input_tokens"] > 0 and step["output_tokens"] > 0
        assert step["cost_usd"] > 0
    assert events[-1].data["cost_usd"] == pytest.approx(sum(u["cost_usd"] for u in usage))


def test_a_transcript_near_the_context_is_summarised_and_the_summary_is_sent_first(
    standin, sandbox, api
):
    conversation = Conversation()
    padding = "Background for later: " + "the widgets are blue. " * 200  # ~4,400 characters
    standin.clear()
    run(
        agent(standin, api),
        turn_of(sandbox, f"create notes.txt with hello\n\n{padding}", GRACE, conversation),
    )
    first_request_tokens = len(standin.model_requests()[0].text()) // 4
    # A context whose compaction threshold (3/4 of it) lies halfway through the padding: the
    # second turn's request, holding the first turn, is over it by far; without the first
    # turn it is under it by far.
    context = int((first_request_tokens - len(padding) // 8) / 0.75)

    standin.clear()
    events = run(
        agent(standin, api, context_tokens=context),
        turn_of(sandbox, "create other.txt with more", ALAN, conversation),
    )
    summary_request, *work = standin.model_requests()
    assert not summary_request.has_tools  # a plain request: the transcript rendered as text
    assert "USER: Request from Grace Hopper (grace):" in summary_request.text()
    assert "files touched" in summary_request.text()
    assert conversation.summary == TITLE  # what the stand-in answers a request without tools
    # Later requests start with the summary and no longer hold the first turn.
    assert work and all(SUMMARY_HEADER in r.text() and padding not in r.text() for r in work)
    assert sandbox.read_file("other.txt") == b"more\n"
    notice = of_kind(events, "notice")[0]
    assert "neared the model's context" in notice["text"] and notice["compacted"] == 4
    compaction = [u for u in of_kind(events, "usage") if u.get("purpose") == "compaction"]
    assert len(compaction) == 1 and compaction[0]["model"] and compaction[0]["input_tokens"]
    # What is stored: the summary, and the messages from the second turn on only.
    assert conversation.messages[0]["author"]["username"] == "alan"
    assert padding not in json.dumps(conversation.messages)

    # The next turn sends the summary first too.
    standin.clear()
    run(agent(standin, api, context_tokens=context), turn_of(sandbox, "hi", GRACE, conversation))
    first_user = user_messages(standin.model_requests()[0].body)[0]["content"]
    first_text = first_user if isinstance(first_user, str) else first_user[0]["text"]
    assert first_text.startswith(SUMMARY_HEADER) and TITLE in first_text


def test_images_are_sent_with_their_turn_and_stored_as_placeholders(standin, sandbox, api):
    conversation = Conversation()
    image = Image(name="screenshot.png", media_type="image/png", data=PNG)
    standin.clear()
    run(
        agent(standin, api),
        turn_of(sandbox, "what is in the picture?", GRACE, conversation, images=(image, image)),
    )
    import base64

    data = base64.b64encode(PNG).decode()
    (request,) = standin.model_requests()
    (user,) = user_messages(request.body)
    if api == "openai":
        assert user["content"][0]["type"] == "text"
        assert (
            user["content"][1:]
            == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}] * 2
        )
    else:
        assert user["content"][0]["type"] == "text"
        assert (
            user["content"][1:]
            == [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": data},
                }
            ]
            * 2
        )
    # The bytes are not stored, nor sent again on a later turn: a placeholder says they were.
    assert (
        conversation.messages[0]["images"]
        == [{"name": "screenshot.png", "media_type": "image/png"}] * 2
    )
    assert data not in json.dumps(conversation.messages)
    standin.clear()
    run(agent(standin, api), turn_of(sandbox, "thanks", ALAN, conversation))
    later = standin.model_requests()[0].text()
    assert data not in later
    assert "[image screenshot.png (image/png) was attached here; it is not sent again]" in later


def test_a_refused_model_fails_the_turn_with_the_providers_words(standin, sandbox, api):
    conversation = Conversation()
    events = run(
        agent(standin, api, model="no-such-model"),
        turn_of(sandbox, "create notes.txt with hello", GRACE, conversation),
    )
    words = (
        "The model `no-such-model` does not exist or you do not have access to it."
        if api == "openai"
        else "model: no-such-model"
    )
    done = events[-1]
    assert done.kind == "done" and done.data["reason"] == "model_error"
    assert done.data["failed"].endswith(f"answered HTTP 404: {words}")
    assert of_kind(events, "error")[-1]["message"] == done.data["failed"]
    # The conversation still records the request, and how the turn ended.
    assert conversation.messages[0]["text"] == "create notes.txt with hello"
    assert conversation.messages[-1]["role"] == "assistant"
    assert words in conversation.messages[-1]["text"]


def test_a_stopped_turn_leaves_every_tool_call_answered(standin, sandbox, api):
    """A turn that ends between a tool call and its result (stopped) leaves a transcript the
    next request can send: the call is answered as not run."""
    conversation = Conversation(
        messages=[
            {"role": "user", "text": "create notes.txt with hello", "author": {"username": "grace",
                                                                               "name": "Grace"}},
            {"role": "assistant", "text": "",
             "tool_calls": [{"id": "call_1", "name": "run_command",
                             "arguments": '{"command": "true"}'}]},
        ]
    )  # fmt: skip
    standin.clear()
    events = run(agent(standin, api), turn_of(sandbox, "hi", ALAN, conversation))
    assert events[-1].data["reason"] == "answered"
    roles = [m["role"] for m in conversation.messages]
    assert roles[:4] == ["user", "assistant", "tool", "assistant"]
    assert conversation.messages[2]["is_error"] is True


def test_a_single_turn_that_outgrows_the_context_summarises_its_older_steps(fake_model, sandbox):
    """Within one turn, the older steps are summarised (a tool call always with its result);
    the prompt and the newest step stay verbatim."""
    from tests.sessions.agents.conftest import chat_message, chat_tool_calls, openai_agent

    fake_model.push(
        chat_tool_calls(("run_command", {"command": "seq 1 3000"})),  # ~14,000 characters
        chat_tool_calls(("read_file", {"path": "README.md"})),
        chat_message("Summary: listed numbers, read the README."),  # the summary request
        chat_message("done"),
    )
    conversation = Conversation()
    events = run(
        openai_agent(fake_model, context_tokens=4000),
        turn_of(sandbox, "count, then read the readme", GRACE, conversation),
    )
    assert events[-1].data["reason"] == "answered"
    summary_request, last = fake_model.requests[2:]
    assert "tools" not in summary_request.body
    asked = summary_request.body["messages"][-1]["content"]
    assert 'AGENT CALLED run_command: {"command": "seq 1 3000"}' in asked
    assert "RESULT of run_command: the command exited with status 0\n1\n2\n" in asked
    assert "2999" not in asked  # a long result is cut short for the summary
    assert "USER:" not in asked  # the prompt itself is kept, not summarised
    sent = json.dumps(last.body)
    assert SUMMARY_HEADER in sent and "Summary: listed numbers" in sent
    assert "2999" not in sent and "count, then read the readme" in sent
    assert "# widgets" in sent  # the newest step, verbatim
    assert [m["role"] for m in conversation.messages] == [
        "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert conversation.summary == "Summary: listed numbers, read the README."
    assert of_kind(events, "notice")[0]["compacted"] == 2
