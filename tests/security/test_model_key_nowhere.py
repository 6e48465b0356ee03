"""Attack: find the platform's model key from inside a session's sandbox while its agent runs —
in any process's environment or command line, in any file of the workspace, the CLIs' state,
$HOME or /tmp — or keep the turn's token and use it after the turn. The agent itself runs the
probe (tests/security/key_probe.py) during a real turn of a real session, on a repository whose
egress is `none`.

What must hold: the key is nowhere in the sandbox; the turn's token is there (it is what the
agent calls models with) but is dead once the turn ends; no stored event holds either.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from sessions import model_access
from sessions.models import Event, ModelAccess, Session
from tests.security.key_probe import PROBE

# Tokens must be committed for other processes (the gateway) to see them, as in production.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

UPSTREAM_KEY = "sk-platform-" + "5e1c7d0a9b3f4e2d8c6b1a0f"
PROBE_COMMAND = "python3 probe.py {sha} {length} {prefix}"


def probe_args(key: str) -> dict[str, object]:
    """What the probe is told about the key: enough to recognise it, not the key."""
    return {"sha": hashlib.sha256(key.encode()).hexdigest(), "length": len(key), "prefix": key[:3]}


@pytest.fixture
def probed_repo(settings, inspect_cli, make_git_repo, team):
    """`widgets` carrying the probe, egress `none` (the default), snapshot ready; the platform
    holds a key for both providers."""
    upstream = make_git_repo(files={"README.md": "# widgets\n", "probe.py": PROBE})
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    settings.ANTHROPIC_API_KEY = settings.LLM_API_KEY = UPSTREAM_KEY
    return team.repository


def probe_report(session_id: int) -> dict:
    texts = [
        str(e.payload.get("text") or e.payload.get("output") or "")
        for e in Event.objects.filter(session_id=session_id).order_by("seq")
    ]
    line = next(t for t in texts if "PROBE {" in t)
    return json.loads(line[line.index("PROBE ") + 6 :].strip().splitlines()[0])


def assert_no_event_holds(session_id: int, *secrets: str) -> None:
    stored = json.dumps(
        list(Event.objects.filter(session_id=session_id).values_list("payload", flat=True))
    )
    for secret in secrets:
        assert secret not in stored


def leaked_tokens(session: Session) -> list[str]:
    """What the probe copied out of the sandbox during the turn."""
    from snapshots.backends import sandbox_backend

    box = sandbox_backend(session.sandbox_backend).attach(session.sandbox_id)
    copied = box.run(["/bin/sh", "-c", 'cat "${HOME:-/root}/.leaked-tokens"'], timeout=30)
    return [line for line in copied.stdout.splitlines() if line]


def test_a_command_agents_probe_finds_no_key_and_a_token_that_dies_with_the_turn(
    probed_repo, create_session
):
    command = PROBE_COMMAND.format(**probe_args(UPSTREAM_KEY))
    code, summary, err = create_session(
        "--prompt", "look around", "--agent-command", command, "--inline", "--as", "engineer"
    )
    assert code == 0, err
    session = Session.objects.get(pk=summary["id"])
    report = probe_report(session.pk)
    assert report["searched"] > 20, report  # it did look: /proc and the files
    assert report["key_hits"] == [], f"the key was readable at {report['key_hits']}"
    # The token was there (the agent's own environment) and is the turn's.
    assert report["token_in_own_environ"], report
    (access,) = ModelAccess.objects.filter(session=session)
    assert report["token_sha256"] == [access.token_sha256]
    (token,) = leaked_tokens(session)
    assert model_access.token_hash(token) == access.token_sha256
    # The turn is over: the token grants nothing.
    assert access.revoked_at is not None
    assert model_access.active(token) is None
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
