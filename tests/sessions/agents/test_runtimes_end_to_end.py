"""End to end, as a team uses it: for each runtime a three-turn session — the first prompt by one
engineer, two follow-ups by a second one that only make sense with the earlier turns — ends
with the right diff on its pull request. The CLIs are the real packages the platform installs,
run in real sandboxes whose egress is `none`, against the stand-in model (tests/standin_model/)
behind the model gateway, which they reach through the sandbox's door with their turn's token
(the built-in agent from the worker); every call is metered; a model the provider does not know
fails the turn with the provider's own words; usage has model, tokens and cost."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

import pytest

from gateway.models import ModelRequest
from sessions.models import Event, ModelAccess, PullRequest, Session
from tests.gateway.conftest import UPSTREAM_KEY

# Tokens are committed: the gateway process checks them through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)

FIRST = "create notes.txt with hello"
SECOND = "also append world to the file you created"  # which file: only turn 1 says
THIRD = "undo what you just did"  # what: only turn 2 says

# The command runtime's agent: a script that reads the conversation the platform gives it.
SCRIPTED_AGENT = r"""python3 - <<'PY'
import json, os, re
said = [json.loads(line) for line in open(os.environ["INSPECT_CONVERSATION"])]
prompts = [entry["text"] for entry in said if entry["role"] == "user"]
now = prompts[-1]
created = [m for p in prompts[:-1] for m in re.findall(r"create (\S+) with (.+)", p)]
if m := re.search(r"create (\S+) with (.+)", now):
    open(m[1], "w").write(m[2] + "\n")
elif m := re.search(r"append (\S+) to the file you created", now):
    open(created[-1][0], "a").write(m[1] + "\n")
elif "undo what you just did" in now:
    path = created[-1][0]
    lines = open(path).read().splitlines(True)
    open(path, "w").writelines(lines[:-1])
print(json.dumps({"kind": "message", "data": {"text": "done: " + now}}))
PY"""


@dataclass(frozen=True)
class Case:
    agent: str
    model: str
    provider: str = "openai"  # what INSPECT_LLM_PROVIDER says
    refused_words: str = ""  # the provider's own words for an unknown model
    refused_model: str = "no-such-model"


ANTHROPIC_REFUSAL = "model: no-such-model"
OPENAI_REFUSAL = "The model `no-such-model` does not exist or you do not have access to it."

CASES = {
    "builtin-openai": Case("builtin", "gpt-4.1", "openai", OPENAI_REFUSAL),
    "builtin-anthropic": Case("builtin", "claude-sonnet-4-5", "anthropic", ANTHROPIC_REFUSAL),
    # Claude Code 2.1.197 prints its own sentence and the API's status, not the API's message.
    "claude-code": Case(
        "claude-code",
        "claude-sonnet-4-5",
        "anthropic",
        "issue with the selected model (no-such-model)",
    ),
    "codex": Case("codex", "gpt-5-codex", "openai", OPENAI_REFUSAL),
    "opencode-openai": Case("opencode", "gpt-4.1", "openai", OPENAI_REFUSAL),
    "opencode-anthropic": Case(
        "opencode",
        "claude-sonnet-4-5",
        "anthropic",
        ANTHROPIC_REFUSAL,
        refused_model="anthropic/no-such-model",
    ),
    "command": Case("command", ""),
}
MODEL_DRIVEN = [name for name, case in CASES.items() if case.agent != "command"]


@pytest.fixture
def standin(fresh_upstream):
    """The provider: the stand-in model, behind the run's gateway."""
    return fresh_upstream


@pytest.fixture
def model_repo(settings, gateway, inspect_cli, make_git_repo, team):
    """`widgets` with egress `none` (the recipe names none), snapshot ready; this run's
    gateway is the one the worker and the sandboxes' doors reach."""
    from snapshots import backends

    settings.GATEWAY_PORT = int(gateway.url.rsplit(":", 1)[1])
    settings.GATEWAY_SOCKET = str(gateway.socket_path)
    settings.AGENT_MAX_WALL_SECONDS = 300
    settings.AUTO_PULL_REQUEST = True
    backends._backends.clear()  # built from the settings above
    upstream = make_git_repo(files={"README.md": "# widgets\n"})
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    yield upstream
    backends._backends.clear()


def configure(settings, case: Case) -> None:
    """The deployment's model settings for `case`: the platform's key for both providers (the
    gateway holds it, started with the same), the provider and the model."""
    settings.LLM_PROVIDER = case.provider
    settings.LLM_API_KEY = settings.ANTHROPIC_API_KEY = UPSTREAM_KEY
    settings.LLM_MODEL = case.model
    settings.AGENT_MODELS = {case.agent: case.model} if case.agent != "builtin" else {}
    settings.LLM_RETRIES = 0


@pytest.fixture
def second_engineer(team):
    from django.contrib.auth import get_user_model

    from accounts.models import Membership, Role

    grace = get_user_model().objects.create_user(
        "grace", first_name="Grace", last_name="Hopper", password="correct horse battery staple"
    )
    Membership.objects.create(user=grace, repository=team.repository, role=Role.ENGINEER)
    return grace


def start(inspect_cli, case: Case, prompt: str, *extra: str) -> dict:
    args = ["session", "create", "widgets", "--json", "--inline", "--as", "engineer"]
    args += ["--prompt", prompt, "--agent", case.agent, *extra]
    if case.agent == "command":
        args += ["--agent-command", SCRIPTED_AGENT]
    code, out, err = inspect_cli(*args)
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == (1 if summary["state"] == "failed" else 0), err  # the CLI says it failed
    return summary


def follow_up(inspect_cli, session_id: int, prompt: str) -> dict:
    code, out, err = inspect_cli(
        "session", "prompt", str(session_id), prompt, "--as", "grace", "--inline", "--json"
    )
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def events(session_id: int, kind: str) -> list[dict]:
    return [
        e.payload for e in Event.objects.filter(session_id=session_id, kind=kind).order_by("seq")
    ]


@pytest.mark.parametrize("name", list(CASES))
def test_a_three_turn_session_continues_the_conversation_and_ends_with_the_right_pull_request(
    name, settings, standin, model_repo, inspect_cli, second_engineer
):
    upstream = model_repo
    case = CASES[name]
    configure(settings, case)
    first = start(inspect_cli, case, FIRST)
    session_id = first["id"]
    assert first["state"] == "pr_open", events(session_id, "error")
    follow_up(inspect_cli, session_id, SECOND)
    last = follow_up(inspect_cli, session_id, THIRD)

    session = Session.objects.get(pk=session_id)
    assert session.state == "pr_open", (last, events(session_id, "error"))
    assert events(session_id, "error") == []
    pull = PullRequest.objects.get(session=session)
    shown = subprocess.run(
        ["git", "-C", str(upstream.path), "show", f"{pull.branch}:notes.txt"],
        capture_output=True,
        text=True,
    )
    # Turn 2 appended to the file turn 1 made; turn 3 undid turn 2, not turn 1.
    assert shown.stdout == "hello\n", shown.stderr
    assert [p["author"] for p in events(session_id, "prompt")] == ["engineer", "grace", "grace"]
    if case.agent == "command":
        return
    # What the model was sent: each follow-up's request holds the earlier turns.
    with_tools = standin.requests_with_tools()
    second = [r for r in with_tools if "also append world" in r.text()]
    third = [r for r in with_tools if "undo what you just did" in r.text()]
    assert second and FIRST in second[0].text()
    assert third and FIRST in third[0].text() and "also append world" in third[0].text()
    assert "Grace" in third[0].text()  # a follow-up is attributed to who asked
    usage = events(session_id, "usage")
    assert usage and all(u.get("model") for u in usage), usage
    assert all(u["input_tokens"] > 0 and u["output_tokens"] > 0 for u in usage), usage
    assert all(u.get("cost_usd") is not None for u in usage), usage
    # Every call went through the gateway, metered under its turn, with the platform's key
    # upstream; each turn had its own token, ended with the turn.
    metered = ModelRequest.objects.filter(session_id=session_id)
    assert metered.count() >= len(standin.model_requests()) > 0
    assert set(metered.values_list("runtime", flat=True)) == {case.agent}
    accesses = ModelAccess.objects.filter(session_id=session_id)
    assert accesses.count() == 3 and not accesses.filter(revoked_at__isnull=True).exists()
    keys = {r.headers.get("x-api-key") or r.headers.get("authorization") for r in
            standin.model_requests()}  # fmt: skip
    assert keys <= {UPSTREAM_KEY, f"Bearer {UPSTREAM_KEY}"}, keys


@pytest.mark.parametrize("name", MODEL_DRIVEN)
def test_a_model_the_provider_does_not_know_fails_the_turn_with_the_providers_words(
    name, settings, standin, model_repo, inspect_cli
):
    case = CASES[name]
    configure(settings, case)
    summary = start(inspect_cli, case, FIRST, "--model", case.refused_model)
    assert summary["state"] == "failed"
    assert case.refused_words in summary["error"], summary["error"]
    errors = [e["message"] for e in events(summary["id"], "error")]
    assert any(case.refused_words in message for message in errors), errors


def test_a_real_cli_turn_pauses_at_a_spent_budget_and_goes_on_when_an_admin_raises_it(
    settings, standin, model_repo, inspect_cli, team
):
    """Claude Code in a sandbox with egress none: its first model call is held by the gateway
    (the engineer's daily budget is spent), the session's log says so, and once an admin raises
    the budget the same call goes through and the turn makes its change."""
    import threading
    import time

    from gateway.budget_admin import budget_set
    from tests.gateway.budget_fixtures import spend

    case = CASES["claude-code"]
    configure(settings, case)
    team.admin.refresh_from_db()  # a site admin
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="0.5")
    spend(None, 0.5, user=team.engineer, repository=team.repository)
    finished: dict = {}

    def run_turn() -> None:
        from django.db import connection

        try:
            finished.update(start(inspect_cli, case, FIRST))
        finally:
            connection.close()  # this thread's own

    turn = threading.Thread(target=run_turn)
    turn.start()
    deadline = time.monotonic() + 120
    while not Event.objects.filter(kind="budget_paused").exists():
        assert time.monotonic() < deadline and turn.is_alive(), finished
        time.sleep(0.2)
    assert standin.model_requests() == []  # held: nothing reached the provider
    budget_set(by=team.admin, scope="user", period="day", target="engineer", limit_usd="5")
    turn.join(timeout=300)
    assert finished["state"] == "pr_open", events(finished["id"], "error")
    assert events(finished["id"], "budget_resumed")
    assert standin.model_requests()
