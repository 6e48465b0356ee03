"""The CLI adapters run their CLI inside the sandbox (canned scripts standing in for the CLIs,
for the adapters' plumbing and parser edge cases; the real CLIs run in
tests/sessions/agents/test_*_real.py):
a missing CLI is reported with how to install it; the prompt arrives on stdin; the key is in the
process environment only and is scrubbed from every event."""

import pytest

from sessions.agents.base import AgentError
from sessions.agents.claude_code import ClaudeCodeAgent
from sessions.agents.codex import CodexAgent
from sessions.agents.opencode import OpenCodeAgent
from sessions.agents.redaction import RedactingRuntime
from tests.sessions.agents import cli_streams
from tests.sessions.agents.conftest import MODEL_KEY, make_turn, of_kind

FAKE_BIN = "/workspace/.fake-bin"


@pytest.mark.parametrize(
    ("adapter", "described"),
    [
        (ClaudeCodeAgent, "Claude Code 2.1.197"),
        (CodexAgent, "Codex 0.171.0"),
        (OpenCodeAgent, "OpenCode 1.18.33"),
    ],
)
def test_a_cli_the_platform_has_not_installed_is_reported_with_how_to_install_it(
    tmp_path, adapter, described, db
):  # db: run-time settings
    from snapshots.sandbox.local import LocalBackend

    # This backend has no agent CLIs directory at all.
    backend = LocalBackend(tmp_path / "sandboxes", tools_dir=tmp_path / "no-agent-clis")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "README.md").write_text("# widgets\n")
    box = backend.create(snapshot=backend.snapshot_from_directory(str(tmp_path / "tree")))
    agent = adapter(env={"SOME_KEY": MODEL_KEY})
    try:
        with pytest.raises(AgentError) as raised:
            list(agent.run(make_turn(box)))
    finally:
        box.terminate()
    message = str(raised.value)
    assert f"{described} is not installed on this platform" in message
    assert "manage.py inspect doctor --install-agents" in message


def install_fake_cli(sandbox, name: str, script: str) -> dict[str, str]:
    sandbox.write_file(f".fake-bin/{name}", ("#!/bin/sh\n" + script).encode(), mode=0o755)
    return {"PATH": f"{FAKE_BIN}:/usr/bin:/bin"}


def test_claude_code_gets_the_prompt_on_stdin_and_its_key_in_its_environment_only(sandbox):
    sandbox.write_file(
        ".fake-bin/stream.jsonl", cli_streams.jsonl(cli_streams.CLAUDE_CODE).encode()
    )
    path = install_fake_cli(
        sandbox,
        "claude",
        # Echo what it was given, leak its key twice, then play the recorded stream.
        "prompt=$(tr '\\n' '/')\n"
        'echo "argv: $*"\n'
        'echo "prompt: $prompt; key: $ANTHROPIC_API_KEY"\n'
        'echo "debug: x-api-key=$ANTHROPIC_API_KEY" >&2\n'
        f"cat {FAKE_BIN}/stream.jsonl\n",
    )
    agent = RedactingRuntime(
        ClaudeCodeAgent(env={"ANTHROPIC_API_KEY": MODEL_KEY}, model="claude-sonnet-4-5"),
        [MODEL_KEY],
    )
    events = list(agent.run(make_turn(sandbox, "make greet say Hello", env=path)))

    outputs = [o["text"] for o in of_kind(events, "output")]
    assert outputs[0] == (
        "argv: -p --output-format stream-json --verbose --dangerously-skip-permissions "
        "--setting-sources  --strict-mcp-config --max-turns 50 --max-budget-usd 5 "
        "--model claude-sonnet-4-5 --append-system-prompt Run `sh check.sh` before finishing."
    )
    assert outputs[1] == (
        "prompt: Request from Ada Engineer (engineer)://make greet say Hello; key: [redacted]"
    )
    assert outputs[2] == "debug: x-api-key=[redacted]"
    assert MODEL_KEY not in repr(events)
    assert of_kind(events, "file_edit") == [{"path": "src/greet.py", "action": "edit"}]
    assert of_kind(events, "usage")[0]["cost_usd"] == 0.0123
    assert events[-1].kind == "done" and events[-1].data["exit_code"] == 0
    # Nothing of the key was written to the workspace.
    found = sandbox.run(["grep", "-rlF", MODEL_KEY, "/workspace", "/tmp"])
    assert found.exit_code == 1, found.stdout


def test_codex_reads_its_prompt_from_stdin_and_a_nonzero_exit_is_reported(
    sandbox, db
):  # db: run-time settings
    path = install_fake_cli(
        sandbox,
        "codex",
        'echo "argv: $*" >&2\n'
        'echo "home: $CODEX_HOME" >&2\n'
        'echo "{\\"type\\":\\"item.completed\\",\\"item\\":{\\"id\\":\\"item_0\\",'
        '\\"type\\":\\"agent_message\\",\\"text\\":\\"$(tr "\\n" /)\\"}}"\nexit 3\n',
    )
    agent = CodexAgent(
        env={"CODEX_API_KEY": MODEL_KEY}, model="gpt-5-codex", base_url="http://model.test/v1"
    )
    events = list(agent.run(make_turn(sandbox, "fix it", env=path)))
    assert of_kind(events, "message") == [{"text": "Request from Ada Engineer (engineer)://fix it"}]
    stderr = [o["text"] for o in of_kind(events, "output") if o["stream"] == "stderr"]
    assert stderr == [
        'argv: exec -c model_provider="inspect" -c model_providers.inspect.name="Inspect" '
        '-c model_providers.inspect.base_url="http://model.test/v1" '
        '-c model_providers.inspect.env_key="CODEX_API_KEY" '
        '-c model_providers.inspect.wire_api="responses" -c features.shell_snapshot=false '
        "--ignore-user-config --ignore-rules --json --skip-git-repo-check "
        "--dangerously-bypass-approvals-and-sandbox --model gpt-5-codex -",
        "home: /workspace/.git/inspect-agent/codex",
    ]
    # With the last line it printed on stderr.
    said = "Codex 0.171.0 exited with status 3: home: /workspace/.git/inspect-agent/codex"
    assert of_kind(events, "error") == [{"message": said}]
    assert events[-1].data == {"exit_code": 3, "failed": said}


def test_a_cli_whose_output_no_longer_parses_fails_the_turn_naming_it_and_the_line(
    sandbox, db
):  # db: run-time settings
    """Canned-script parser edge case: a CLI version that prints something else."""
    install_fake_cli(sandbox, "codex", 'echo "Codex 9 says hello"\necho "{}"\n')
    agent = CodexAgent(env={"CODEX_API_KEY": MODEL_KEY})
    agent.version = "9.0.0"
    turn = make_turn(sandbox, "fix it", options={"cli_binary": f"{FAKE_BIN}/codex"})
    events = list(agent.run(turn))
    failed = events[-1].data["failed"]
    assert failed == (
        "Codex 9.0.0: its output no longer parses as this adapter expects; the first line "
        "that did not: 'Codex 9 says hello'"
    )
    assert of_kind(events, "error") == [{"message": failed}]


def test_a_cli_over_the_turns_token_limit_is_killed_and_reported(sandbox):
    from sessions.agents.base import TurnLimits

    sandbox.write_file(".fake-bin/stream.jsonl", cli_streams.jsonl(cli_streams.OPENCODE).encode())
    path = install_fake_cli(
        sandbox, "opencode", f"head -6 {FAKE_BIN}/stream.jsonl; sleep 60; echo never\n"
    )
    agent = OpenCodeAgent(env={"OPENAI_API_KEY": MODEL_KEY})
    turn = make_turn(sandbox, env=path, limits=TurnLimits(tokens=10_000))
    events = list(agent.run(turn))
    error = of_kind(events, "error")[-1]
    assert error["limit"] == "tokens"
    assert error["message"].startswith("the turn used 19,303 tokens, its limit is 10,000")
    assert "never" not in [o.get("text") for o in of_kind(events, "output")]
