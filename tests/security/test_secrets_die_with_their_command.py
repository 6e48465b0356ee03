"""Red team, through the real callers: the model key given to a CLI agent and the secrets a
recipe `start` service declares are readable by no later command (issue 14, finding 3)."""

from __future__ import annotations

import os

import pytest

from sessions.agents.claude_code import ClaudeCodeAgent
from tests.approvals.conftest import secrets_key  # noqa: F401 - fixture
from tests.security.test_process_isolation import SCAN
from tests.sessions.agents import cli_streams
from tests.sessions.agents.conftest import MODEL_KEY, make_turn, sandbox  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")

FAKE_BIN = "/workspace/.fake-bin"


def scan_for(sb, value: str) -> str:
    return sb.run(["/usr/bin/python3", "-c", SCAN.replace(SECRET_IN_SCAN, value)]).stdout


SECRET_IN_SCAN = "s3cr3t-value-" + "9" * 24


def test_a_cli_agents_key_is_not_left_behind_for_later_commands(sandbox):  # noqa: F811
    sandbox.write_file(
        ".fake-bin/stream.jsonl", cli_streams.jsonl(cli_streams.CLAUDE_CODE).encode()
    )
    # A CLI (or a tool it ran) that leaves daemons behind, with the key in their environment.
    sandbox.write_file(
        ".fake-bin/claude",
        (
            "#!/bin/sh\ncat >/dev/null\n"
            "sleep 300 & (setsid sleep 301 >/dev/null 2>&1 &)\n"
            f"cat {FAKE_BIN}/stream.jsonl\n"
        ).encode(),
        mode=0o755,
    )
    agent = ClaudeCodeAgent(env={"ANTHROPIC_API_KEY": MODEL_KEY}, model="claude-sonnet-4-5")
    turn = make_turn(sandbox, env={"PATH": f"{FAKE_BIN}:/usr/bin:/bin"})
    events = list(agent.run(turn))
    assert events[-1].kind == "done" and events[-1].data["exit_code"] == 0
    assert scan_for(sandbox, MODEL_KEY).startswith("CLEAN")
    left = sandbox.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout
    assert "sleep 30" not in left


@pytest.mark.django_db(transaction=True)
def test_only_the_start_service_that_names_a_secret_gets_it_and_keeps_it(
    team,
    secrets_key,  # noqa: F811
    inspect_cli,
    make_git_repo,
):
    from approvals.secrets import secret_set
    from snapshots.models import Snapshot
    from snapshots.restore import restore_sandbox

    token = "tok-" + "7" * 32  # secrets_key: a Fernet key is configured
    recipe = (
        'start = ["sleep 300 >/dev/null 2>&1 &",'
        ' { command = "echo ${OTHER_TOKEN:-unset} ${#NPM_TOKEN} > /tmp/seen;'
        ' sleep 301 >/dev/null 2>&1 &", secrets = ["NPM_TOKEN"] }]\n'
    )
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": recipe})
    team.repository.url = str(upstream.path)
    team.repository.save()
    secret_set(repository=team.repository, name="NPM_TOKEN", value=token, by=team.admin)
    secret_set(
        repository=team.repository, name="OTHER_TOKEN", value="other-" + token, by=team.admin
    )
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, out + err
    snapshot = Snapshot.objects.get(repository=team.repository)
    restored = restore_sandbox(team.repository, snapshot=snapshot)
    sb = restored.sandbox
    try:
        running = sb.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout
        assert "sleep 300" in running and "sleep 301" in running  # both keep running
        assert sb.run("cat /tmp/seen").stdout == f"unset {len(token)}\n"
        # The plain daemon got no secret; the service's are readable by no later command.
        assert scan_for(sb, token).startswith("CLEAN")
    finally:
        sb.terminate()
