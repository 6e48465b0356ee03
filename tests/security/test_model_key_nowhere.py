"""Attack: find the platform's model key from inside a session's sandbox while its agent runs —
in any process's environment or command line, in any file of the workspace, the CLIs' state,
$HOME or /tmp — or keep the turn's token and use it after the turn. The agent itself runs the
probe (tests/security/key_probe.py) during a real turn of a real session, on a repository whose
egress is `none`.

What must hold: the key is nowhere in the sandbox; the turn's token is there (it is what the
agent calls models with) but is dead once the turn ends; no stored event holds either. The same
probe typed in the web terminal while the turn runs finds neither the key nor the agent's token.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time

import httpx
import pytest

from sessions import model_access
from sessions.models import Event, ModelAccess, Session
from tests.gateway.conftest import UPSTREAM_KEY
from tests.security.key_probe import PROBE
from tests.sessions.stream.conftest import in_thread
from tests.sessions.terminal.conftest import TerminalClient

# Tokens must be committed for other processes (the gateway) to see them, as in production.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

PROBE_COMMAND = "python3 probe.py {sha} {length} {prefix}"


def probe_args(key: str) -> dict[str, object]:
    """What the probe is told about the key: enough to recognise it, not the key."""
    return {"sha": hashlib.sha256(key.encode()).hexdigest(), "length": len(key), "prefix": key[:3]}


@pytest.fixture
def probed_repo(settings, inspect_cli, make_git_repo, team, gateway, platform_gateway):
    """`widgets` carrying the probe, egress `none` (the default), snapshot ready; the platform
    holds a key for both providers, which the run's gateway (in front of the stand-in model)
    uses."""
    platform_gateway(gateway)
    upstream = make_git_repo(files={"README.md": "# widgets\n", "probe.py": PROBE})
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    settings.ANTHROPIC_API_KEY = settings.LLM_API_KEY = UPSTREAM_KEY
    return team.repository


def probe_report(session_id: int) -> dict:
    """The probe's findings, from the session's log: its line as the `command` agent's message,
    or inside a CLI's tool result (as the probe printed it)."""
    for event in Event.objects.filter(session_id=session_id).order_by("seq"):
        text = str(event.payload.get("text") or event.payload.get("output") or "")
        for line in text.splitlines():
            if line.startswith('{"kind"'):
                line = str(json.loads(line)["data"]["text"])
            if line.startswith("PROBE {"):
                return json.loads(line.removeprefix("PROBE "))
    raise AssertionError("the probe's report is not in the session's log")


def assert_no_event_holds(session_id: int, *secrets: str) -> None:
    stored = json.dumps(
        list(Event.objects.filter(session_id=session_id).values_list("payload", flat=True))
    )
    for secret in secrets:
        assert secret not in stored


def refused_soon(gateway_url: str, token: str, within: float = 2.0) -> httpx.Response:
    """The gateway's answer to a call with `token` once its refusal is due: the gateway caches
    a token's lookup for half a second, so a revoked token is refused within a second."""
    deadline = time.monotonic() + within
    while True:
        answer = httpx.post(
            gateway_url + "/anthropic/v1/messages",
            headers={"x-api-key": token, "anthropic-version": "2023-06-01"},
            json={"model": "claude-sonnet-4-5", "max_tokens": 16,
                  "messages": [{"role": "user", "content": "hello"}]},
        )  # fmt: skip
        if answer.status_code == 401 or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def leaked_tokens(session: Session) -> list[str]:
    """What the probe copied out of the sandbox during the turn."""
    from snapshots.backends import sandbox_backend

    box = sandbox_backend(session.sandbox_backend).attach(session.sandbox_id)
    copied = box.run(["cat", "/workspace/.git/leaked-tokens"], timeout=30)
    return [line for line in copied.stdout.splitlines() if line]


@pytest.mark.parametrize("agent", ["command", "claude-code"])
def test_the_agents_probe_finds_no_key_and_a_token_that_dies_with_the_turn(
    agent, probed_repo, create_session, gateway, fresh_upstream, settings
):
    probe = PROBE_COMMAND.format(**probe_args(UPSTREAM_KEY))
    if agent == "command":
        how = ["--agent-command", probe]
    else:  # the model (the stand-in) runs the probe with the CLI's own shell tool
        settings.AGENT_MODELS = {agent: "claude-sonnet-4-5"}
        how = ["--agent", agent]
    prompt = f"run the command `{probe}`"
    code, summary, err = create_session("--prompt", prompt, *how, "--inline", "--as", "engineer")
    assert code == 0, err
    session = Session.objects.get(pk=summary["id"])
    report = probe_report(session.pk)
    assert report["searched"] > 20, report  # it did look: /proc and the files
    assert report["key_hits"] == [], f"the key was readable at {report['key_hits']}"
    # The token was there (the agent's own environment, which its commands inherit) and it is
    # the turn's.
    assert report["token_in_own_environ"], report
    (access,) = ModelAccess.objects.filter(session=session)
    assert report["token_sha256"] == [access.token_sha256]
    (token,) = leaked_tokens(session)
    assert model_access.token_hash(token) == access.token_sha256
    # The turn is over: the copied token grants nothing.
    access.refresh_from_db()
    assert access.revoked_at is not None
    refused = refused_soon(gateway.url, token)
    assert refused.status_code == 401
    assert "this session's model access ended; start a new turn" in refused.text
    assert_no_event_holds(session.pk, UPSTREAM_KEY, token)


def test_the_probe_finds_a_key_that_is_there(probed_repo, create_session, settings, team):
    """The control: what the CLIs had before the gateway (the key in the agent's environment,
    here as an agent-scoped repository secret) is found — so an empty finding means absence."""
    from cryptography.fernet import Fernet

    from approvals.secrets import secret_set

    settings.SECRETS_KEY = Fernet.generate_key().decode()
    secret_set(
        repository=team.repository, name="DEPLOY_KEY", value=UPSTREAM_KEY, scope="agent",
        by=team.admin,
    )  # fmt: skip
    command = PROBE_COMMAND.format(**probe_args(UPSTREAM_KEY))
    code, summary, err = create_session(
        "--prompt", "look around", "--agent-command", command, "--inline", "--as", "engineer"
    )
    assert code == 0, err
    report = probe_report(summary["id"])
    assert any(hit.endswith("/environ") for hit in report["key_hits"]), report
    assert_no_event_holds(summary["id"], UPSTREAM_KEY)


# The command agent's turn lasts until the terminal's probe is done (at most a minute).
WAIT_FOR_PROBE = (
    "for i in $(seq 600); do [ -e /workspace/.git/probe-done ] && break; sleep 0.1; done"
)


async def test_the_same_probe_typed_in_the_web_terminal_during_the_turn_finds_no_key(
    probed_repo, create_session, terminal_daphne, cookies
):
    turn = asyncio.ensure_future(
        in_thread(
            create_session,
            "--prompt",
            "wait",
            "--agent-command",
            WAIT_FOR_PROBE,
            "--inline",
            "--as",
            "engineer",
        )  # fmt: skip
    )

    def running_turn() -> Session | None:
        return (
            Session.objects.filter(state="running", model_accesses__revoked_at__isnull=True)
            .exclude(sandbox_id="")
            .first()
        )

    session = None
    for _ in range(600):
        session = await in_thread(running_turn)
        if session is not None or turn.done():
            break
        await asyncio.sleep(0.1)
    assert session is not None, turn.result() if turn.done() else "the turn never ran"
    term = await TerminalClient.open(terminal_daphne, session.pk, cookies["engineer"])
    await term.until_message("hello", timeout=60)
    probe = PROBE_COMMAND.format(**probe_args(UPSTREAM_KEY))
    await term.type(f"{probe}; touch /workspace/.git/probe-done; echo probed-$((6*7))\r")
    output = await term.until_output(b"probed-42", timeout=60)  # the agent's turn may end
    await term.close()
    code, summary, err = await turn
    assert code == 0, err
    line = next(
        line for line in output.decode(errors="replace").splitlines() if line.startswith('{"kind"')
    )
    report = json.loads(str(json.loads(line)["data"]["text"]).removeprefix("PROBE "))
    assert report["searched"] > 20, report
    assert report["key_hits"] == [], f"the key was readable at {report['key_hits']}"
    # The agent's token is its own process tree's: the terminal's shell sees none.
    assert report["token_sha256"] == [], report
