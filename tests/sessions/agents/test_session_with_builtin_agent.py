"""End to end: `inspect session create widgets --agent builtin` with an OpenAI-compatible
endpoint configured gets a real change, verified and diffed."""

import json

import pytest

from sessions.models import Event, Session
from tests.gateway.conftest import wait_until_recorded
from tests.sessions.agents.conftest import (
    MODEL_KEY,
    Reply,
    chat_message,
    chat_tool_calls,
    openai_error,
)

pytestmark = pytest.mark.django_db(transaction=True)  # the gateway process reads the tokens


@pytest.fixture
def llm(settings, fake_model, start_gateway, platform_gateway):
    # The scripted model as the provider, behind a gateway of its own (the worker's built-in
    # agent reaches models only through the gateway, with its turn's token).
    fake_model.gateway = start_gateway(fake_model.url, fake_model.url + "/v1")
    platform_gateway(fake_model.gateway)
    settings.LLM_PROVIDER = "openai"
    settings.LLM_BASE_URL = fake_model.url + "/v1"
    settings.LLM_API_KEY = MODEL_KEY
    settings.LLM_MODEL = "gpt-4.1"
    settings.LLM_RETRIES = 1
    yield fake_model
    # The gateway's last records land just after the turn; not while the database is flushed.
    wait_until_recorded(list(Session.objects.all()))


def payloads(session_id) -> str:
    return json.dumps(list(Event.objects.filter(session_id=session_id).values("kind", "payload")))


def test_the_builtin_agent_makes_a_real_change_that_is_verified_and_diffed(
    ready_repo, create_session, llm
):
    llm.push(
        chat_tool_calls(("list_files", {})),
        chat_tool_calls(("write_file", {"path": "greeting.txt", "content": "hello\n"})),
        chat_tool_calls(("run_command", {"command": "cat greeting.txt"})),
        chat_tool_calls(("finish", {"summary": "Added greeting.txt."})),
    )
    code, summary, err = create_session(
        "--prompt", "add a greeting", "--agent", "builtin", "--inline"
    )
    assert code == 0, err
    assert summary["state"] == "idle"
    assert summary["diff"] == {"files": 1, "added": 1, "removed": 0, "paths": ["greeting.txt"]}

    events = list(Event.objects.filter(session_id=summary["id"]).order_by("seq"))
    kinds = [e.kind for e in events]
    for kind in ("tool_call", "tool_result", "file_edit", "usage", "agent_message", "diff"):
        assert kind in kinds, kind
    assert [e.payload["name"] for e in events if e.kind == "tool_call"] == [
        "list_files", "write_file", "run_command", "finish",
    ]  # fmt: skip
    usage = [e.payload for e in events if e.kind == "usage"]
    assert len(usage) == 4 and usage[-1]["turn_cost_usd"] == pytest.approx(4 * 0.0024)
    assert next(e.payload for e in events if e.kind == "agent_message")["text"] == (
        "Added greeting.txt."
    )
    diff = next(e.payload for e in events if e.kind == "diff")
    assert diff["path"] == "greeting.txt" and "+hello" in diff["patch"]
    verify = [e.payload for e in events if e.kind == "command"]
    assert [(v["command"], v["ok"]) for v in verify] == [
        ("test -f README.md", True),
        ("echo checked", True),
    ]
    # The repository's AGENTS.md reached the system prompt.
    assert "Be brief." in llm.requests[0].body["messages"][0]["content"]
    assert MODEL_KEY not in payloads(summary["id"])


def test_the_model_key_is_not_in_the_sandbox_nor_in_any_stored_event(
    ready_repo, create_session, llm
):
    llm.push(
        chat_tool_calls(
            (
                "run_command",
                {
                    "command": "env; cat /proc/1/environ | tr '\\0' '\\n'; "
                    "grep -rlF sk-test- /workspace /tmp; true"
                },
            )
        ),  # fmt: skip
        # A model (or a prompt injection) repeating a key must not put it in the log.
        chat_message(f"Your key is {MODEL_KEY}."),
    )
    code, summary, err = create_session("--prompt", "show env", "--agent", "builtin", "--inline")
    assert code == 0, err
    stored = payloads(summary["id"])
    assert MODEL_KEY not in stored
    result = Event.objects.get(session_id=summary["id"], kind="tool_result").payload
    assert "PWD=/workspace" in result["output"]  # the environment really was printed
    # pid 1 (bubblewrap) runs as another uid than the command: its environ is not even readable.
    assert "sk-test-" not in result["output"]  # and held no key, nor did any file
    message = Event.objects.get(session_id=summary["id"], kind="agent_message").payload
    assert message["text"] == "Your key is [redacted]."


def test_a_model_that_does_not_exist_fails_the_session_with_the_apis_words(
    ready_repo, create_session, llm
):
    verbatim = "The model `gpt-4.1` does not exist or you do not have access to it."
    llm.push(Reply(openai_error(verbatim, code="model_not_found"), 404))
    code, summary, _ = create_session("--prompt", "x", "--agent", "builtin", "--inline")
    assert code == 1
    assert summary["state"] == "failed"
    assert summary["error"] == (
        f"the model API at {llm.gateway.url}/openai/v1 answered HTTP 404: {verbatim}"
    )
    error = Event.objects.filter(session_id=summary["id"], kind="error").last().payload
    assert error["message"] == summary["error"]


def test_the_builtin_agent_without_a_key_is_refused_before_anything_is_queued(
    ready_repo, create_session, settings
):
    settings.LLM_PROVIDER = "auto"
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    settings.LLM_API_KEY = settings.ANTHROPIC_API_KEY = ""
    code, _, err = create_session("--prompt", "x", "--agent", "builtin")
    assert code == 1
    assert "the builtin agent needs a model: set INSPECT_LLM_API_KEY" in err
    assert not Session.objects.exists()


def test_choosing_a_cli_agent_the_platform_has_not_installed_fails_the_turn_saying_how(
    ready_repo, create_session, settings, tmp_path, monkeypatch
):
    from snapshots import backends

    settings.ANTHROPIC_API_KEY = MODEL_KEY
    settings.AGENT_CLIS_DIR = tmp_path / "no-agent-clis"
    monkeypatch.setattr(backends, "_backends", {})
    code, summary, _ = create_session("--prompt", "x", "--agent", "claude-code", "--inline")
    assert code == 1 and summary["state"] == "failed"
    assert "Claude Code 2.1.197 is not installed on this platform" in summary["error"]


def test_the_builtin_agent_starts_during_the_drift_sync_and_edits_the_synced_workspace(
    ready_repo, create_session, llm
):
    # Upstream moved on after the snapshot: the sandbox is restored behind and synced while the
    # agent already runs; its edit needs the new text, so it only works on the synced workspace.
    ready_repo.upstream.commit({"README.md": "# widgets\n\nNew upstream line.\n"}, "upstream")
    llm.push(
        chat_tool_calls(("list_files", {})),
        chat_tool_calls(
            (
                "edit_file",
                {
                    "path": "README.md",
                    "old_string": "New upstream line.",
                    "new_string": "Edited after sync.",
                },
            )
        ),
        chat_tool_calls(("finish", {"summary": "Edited."})),
    )
    code, summary, err = create_session("--prompt", "edit the readme", "--inline")
    assert code == 0, err
    assert summary["state"] == "idle"
    events = list(Event.objects.filter(session_id=summary["id"]).order_by("seq"))
    moves = [e.payload["to"] for e in events if e.kind == "state"]
    assert moves[:3] == ["provisioning", "syncing", "running"]
    synced = next(e for e in events if e.kind == "workspace_synced")
    assert synced.payload["drift"]["commits"] == 1
    edit = next(
        e.payload for e in events if e.kind == "tool_result" and e.payload["name"] == "edit_file"
    )
    assert edit["ok"], edit
    # Whatever the timing, the edit is logged after the sync that it needed.
    edit_event = next(
        e for e in events if e.kind == "tool_result" and e.payload["name"] == "edit_file"
    )
    assert edit_event.seq > synced.seq
    diff = next(e.payload for e in events if e.kind == "diff")
    assert "+Edited after sync." in diff["patch"]
    assert Session.objects.get(pk=summary["id"]).timings["sync_ms"] > 0


@pytest.mark.parametrize(
    ("limit", "value", "says"),
    [
        ("AGENT_MAX_STEPS", 2, "limit of 2 model steps"),
        ("AGENT_MAX_COST_USD", 0.004, "the turn cost $0.0048, its limit is $0.0040"),
    ],
)
def test_a_turn_over_its_limit_is_stopped_reported_and_its_work_kept(
    ready_repo, create_session, llm, settings, limit, value, says
):
    setattr(settings, limit, value)
    llm.push(
        chat_tool_calls(("write_file", {"path": "partial.txt", "content": "half\n"})),
        *[chat_tool_calls(("read_file", {"path": "README.md"})) for _ in range(8)],
    )
    code, summary, err = create_session("--prompt", "do a lot", "--agent", "builtin", "--inline")
    assert code == 0, err
    assert summary["state"] == "idle"
    assert len(llm.requests) == 2  # each step costs $0.0024 here
    error = Event.objects.filter(session_id=summary["id"], kind="error").get().payload
    assert says in error["message"] and "the work so far is kept" in error["message"]
    assert summary["diff"]["paths"] == ["partial.txt"]
    assert Session.objects.get(pk=summary["id"]).prompts.get().commit
