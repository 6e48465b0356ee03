"""The audit log keeps what docs/approvals-and-audit.md promises: every sandbox command (recipe
`start` and `verify`, the `command` agent's command, a CLI agent's process and the commands it
reports), every agent tool call, and each turn's file-change summary whatever state the turn
ends in — found after real sessions of each runtime, in real sandboxes."""

from __future__ import annotations

import threading
import time

import pytest
from cryptography.fernet import Fernet

from approvals.models import AuditEntry
from sessions.models import Session
from tests.sessions.agents import cli_streams
from tests.sessions.agents.conftest import MODEL_KEY, chat_tool_calls

# Real commits: the audit of events is written after they commit, as in production.
pytestmark = pytest.mark.django_db(transaction=True)

AGENT = 'printf "hello from $INSPECT_AUTHOR\\n" > greeting.txt; ls > /dev/null'
RECIPE = """\
setup = ["mkdir -p .cli && cp tools/* .cli/ && chmod +x .cli/*"]
start = ["echo started > /tmp/started"]
verify = ["test -f README.md"]
"""
# Each fake CLI makes a real change, then plays its CLI's recorded JSON stream.
FAKE_CLI = "#!/bin/sh\ncat > /dev/null\nprintf 'hello\\n' > greeting.txt\ncat /workspace/.cli/{}\n"


@pytest.fixture
def audited_repo(settings, inspect_cli, make_git_repo, team):
    """`widgets` with `start` and `verify` commands and fake agent CLIs on the agent's PATH,
    pushing pull requests to a real local upstream."""
    from approvals.secrets import secret_set

    settings.SECRETS_KEY = Fernet.generate_key().decode()
    files = {
        "README.md": "# widgets\n",
        ".gitignore": ".cli/\n",
        ".inspect/environment.toml": RECIPE,
        "tools/claude.jsonl": cli_streams.jsonl(cli_streams.CLAUDE_CODE),
        "tools/codex.jsonl": cli_streams.jsonl(cli_streams.CODEX),
        "tools/opencode.jsonl": cli_streams.jsonl(cli_streams.OPENCODE[:-1]),
    }
    for binary in ("claude", "codex", "opencode"):
        files[f"tools/{binary}"] = FAKE_CLI.format(f"{binary}.jsonl")
    upstream = make_git_repo(files=files)
    upstream.git("config", "receive.denyCurrentBranch", "updateInstead")
    team.repository.url = str(upstream.path)
    team.repository.save()
    secret_set(
        repository=team.repository,
        name="PATH",
        value="/workspace/.cli:/usr/bin:/bin",
        scope="agent",
        by=team.admin,
    )
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    settings.ANTHROPIC_API_KEY = settings.LLM_API_KEY = MODEL_KEY
    return team.repository


def _entries(session_id: int, action: str) -> list[dict]:
    return list(
        AuditEntry.objects.filter(session_id=session_id, action=action)
        .order_by("seq")
        .values_list("data", flat=True)
    )


def _commands(session_id: int, phase: str) -> list[str]:
    return [
        data["command"]
        for data in _entries(session_id, "sandbox.command")
        if data.get("phase") == phase
    ]


def test_a_command_agent_turn_that_opens_a_pull_request_is_audited_whole(
    settings, audited_repo, create_session, inspect_cli
):
    settings.AUTO_PULL_REQUEST = True
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert summary["state"] == "pr_open"
    session_id = summary["id"]

    assert _commands(session_id, "start") == ["echo started > /tmp/started"]
    assert _commands(session_id, "agent") == [AGENT]
    assert _commands(session_id, "verify") == ["test -f README.md"]
    (changes,) = _entries(session_id, "session.changes")
    assert changes["ended"] == "pr_open" and changes["paths"] == ["greeting.txt"]
    assert changes["turn"] == 1 and changes["prompt_author"] == "engineer"
    assert len(changes["commit"]) == 40
    assert len(_entries(session_id, "pull_request.open")) == 1

    # A follow-up turn, resting at pr_open again, has its own summary and commands.
    code, out, err = inspect_cli("session", "prompt", str(session_id), "more", "--inline",
                                 "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert Session.objects.get(pk=session_id).state == "pr_open"
    assert [c["turn"] for c in _entries(session_id, "session.changes")] == [1, 2]
    assert _commands(session_id, "agent") == [AGENT, AGENT]


def test_every_tool_call_of_the_builtin_agent_is_audited(
    settings, audited_repo, create_session, fake_model, start_gateway, platform_gateway
):
    # The scripted model as the provider, behind a gateway of its own.
    platform_gateway(start_gateway(fake_model.url, fake_model.url + "/v1"))
    settings.LLM_PROVIDER = "openai"
    settings.LLM_MODEL, settings.LLM_RETRIES = "gpt-4.1", 1
    fake_model.push(
        chat_tool_calls(("list_files", {})),
        chat_tool_calls(("write_file", {"path": "greeting.txt", "content": "hello\n"})),
        chat_tool_calls(("run_command", {"command": "cat greeting.txt"})),
        chat_tool_calls(("finish", {"summary": "Added greeting.txt."})),
    )
    code, summary, err = create_session("--prompt", "add a greeting", "--agent", "builtin",
                                        "--inline")  # fmt: skip
    assert code == 0, err
    calls = _entries(summary["id"], "agent.tool_call")
    assert [c["tool"] for c in calls] == ["list_files", "write_file", "run_command", "finish"]
    assert calls[2]["arguments"] == {"command": "cat greeting.txt"}
    assert _commands(summary["id"], "start") and _commands(summary["id"], "verify")
    (changes,) = _entries(summary["id"], "session.changes")
    assert changes["ended"] == "idle" and changes["paths"] == ["greeting.txt"]


@pytest.mark.parametrize(
    ("agent", "binary", "reported"),
    [
        ("claude-code", "claude", [("Bash", "sh check.sh")]),
        (
            "codex",
            "codex",
            [("shell", "bash -lc 'grep -rn Hi src'"), ("shell", "bash -lc 'sh check.sh'")],
        ),
        ("opencode", "opencode", [("bash", "sh check.sh")]),
    ],
)
def test_a_cli_agents_process_and_the_commands_it_reports_are_audited(
    audited_repo, create_session, agent, binary, reported
):
    code, summary, err = create_session("--prompt", "add a greeting", "--agent", agent,
                                        "--inline")  # fmt: skip
    assert code == 0, err
    session_id = summary["id"]
    (process,) = _commands(session_id, "agent")
    assert process.startswith(binary + " ")
    calls = _entries(session_id, "agent.tool_call")
    commands = [
        (c["tool"], c["arguments"]["command"]) for c in calls if "command" in c["arguments"]
    ]
    assert commands == reported
    (changes,) = _entries(session_id, "session.changes")
    assert changes["ended"] == "idle" and changes["paths"] == ["greeting.txt"]


def test_a_turn_that_fails_still_writes_its_summary(settings, audited_repo, create_session):
    settings.ANTHROPIC_API_KEY = MODEL_KEY
    # The agent changes a file, then takes the workspace's git with it: the turn fails.
    agent = "echo partial > notes.txt; rm -rf .git"
    code, summary, err = create_session("--prompt", "x", "--agent-command", agent, "--inline")
    assert summary["state"] == "failed", summary
    (changes,) = _entries(summary["id"], "session.changes")
    assert changes["ended"] == "failed"
    assert _commands(summary["id"], "agent") == [agent]


def test_a_stopped_turn_writes_its_summary_and_its_agents_end(audited_repo, create_session, team):
    from django.db import connection

    from sessions import services
    from sessions.models import Event

    agent = "echo partial > partial.txt; echo started; sleep 60"

    def stop_once_started() -> None:
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                started = Event.objects.filter(kind="output", payload__text="started").first()
                if started is not None:
                    services.session_stop(session=started.session, user=team.admin)
                    return
                time.sleep(0.05)
        finally:
            connection.close()

    stopper = threading.Thread(target=stop_once_started)
    stopper.start()
    code, summary, err = create_session("--prompt", "long", "--agent-command", agent, "--inline")
    stopper.join()
    assert code == 0, err
    (changes,) = _entries(summary["id"], "session.changes")
    assert (changes["ended"], changes["stopped_by"]) == ("idle", "admin")
    assert changes["paths"] == ["partial.txt"]
    (process,) = [
        d for d in _entries(summary["id"], "sandbox.command") if d.get("phase") == "agent"
    ]
    assert process["command"] == agent and process["stopped"] and not process["ok"]


def test_start_commands_outside_a_session_are_audited_as_the_repositorys(audited_repo):
    """A sandbox restored for the terminal, screenshots or a prewarm runs `start` too."""
    from snapshots.restore import restore_sandbox

    restored = restore_sandbox(audited_repo, sync=False)
    restored.sandbox.terminate()
    (entry,) = AuditEntry.objects.filter(action="sandbox.command", session_id=None)
    assert entry.repository_id == audited_repo.pk and entry.object_id == restored.sandbox.id
    assert entry.data == {
        "command": "echo started > /tmp/started",
        "phase": "start",
        "exit_code": 0,
        "ok": True,
    }
