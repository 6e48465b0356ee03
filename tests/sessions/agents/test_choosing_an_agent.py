"""Agents are chosen by name; an unknown name or a missing key is refused with what to set."""

import json

import pytest

from approvals.redaction import redact
from sessions.agents import RUNTIME_NAMES, get_runtime, validate_agent
from sessions.agents.base import AgentError, AgentEvent, AgentRuntime
from sessions.agents.providers import llm_provider, turn_limits
from sessions.agents.redaction import RedactingRuntime
from sessions.model_access import route_for
from tests.sessions.agents.conftest import MODEL_KEY

TOKEN = "iwt_" + "t" * 43
# A sandbox's route to the gateway (its loopback door), and the worker's.
SANDBOX_ROUTE = route_for("http://127.0.0.1:4181", TOKEN)
WORKER_ROUTE = route_for("http://127.0.0.1:8765", TOKEN)


def runtime(name, route=SANDBOX_ROUTE, **kwargs):
    return get_runtime(name, route=WORKER_ROUTE if name == "builtin" else route, **kwargs)


@pytest.fixture
def no_keys(settings, db):  # the Models page's settings are read from the database
    settings.LLM_PROVIDER = "auto"
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    settings.LLM_API_KEY = settings.ANTHROPIC_API_KEY = settings.LLM_MODEL = ""
    return settings


def test_the_registry_names_every_runtime():
    assert set(RUNTIME_NAMES) == {"builtin", "opencode", "claude-code", "codex", "command"}
    with pytest.raises(AgentError, match="unknown agent 'hal9000'; available: command, builtin"):
        validate_agent("hal9000")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("builtin", "the builtin agent needs a model: set INSPECT_LLM_API_KEY"),
        ("claude-code", "the claude-code agent needs ANTHROPIC_API_KEY to be set"),
        ("codex", "the codex agent needs INSPECT_LLM_API_KEY (an OpenAI API key)"),
        ("opencode", "the opencode agent needs INSPECT_LLM_API_KEY or ANTHROPIC_API_KEY"),
        ("command", "the command agent needs a command (--agent-command)"),
    ],
)
def test_an_agent_missing_what_it_needs_is_refused(no_keys, name, message):
    with pytest.raises(AgentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_agent(name)


def test_a_local_openai_compatible_server_needs_no_key(no_keys):
    no_keys.LLM_BASE_URL = "http://127.0.0.1:11434/v1"
    no_keys.LLM_MODEL = "qwen2.5-coder:7b"
    builtin = runtime("builtin")
    assert isinstance(builtin, RedactingRuntime)
    assert (builtin.client.provider, builtin.model) == ("openai", "qwen2.5-coder:7b")
    # Through the gateway (from the worker), with the turn's token as its key.
    assert builtin.client.base_url == "http://127.0.0.1:8765/openai/v1"
    assert builtin.client.api_key == TOKEN
    # Only the built-in agent holds its writes for the drift sync; the runner waits for others.
    assert builtin.honours_sync and not runtime("command", command="true").honours_sync


def test_an_anthropic_key_alone_selects_the_messages_api(no_keys):
    no_keys.ANTHROPIC_API_KEY = MODEL_KEY
    assert llm_provider() == "anthropic"
    builtin = runtime("builtin")
    assert (builtin.client.provider, builtin.model) == ("anthropic", "claude-sonnet-4-5")
    assert builtin.client.base_url == "http://127.0.0.1:8765/anthropic"
    assert builtin.client.api_key == TOKEN
    assert runtime("builtin", model="claude-opus-4-1").model == "claude-opus-4-1"
    no_keys.LLM_API_KEY = "sk-other-0123456789"
    assert llm_provider() == "openai"  # both set: the OpenAI-compatible endpoint wins
    no_keys.LLM_PROVIDER = "anthropic"
    assert llm_provider() == "anthropic"


def test_no_runtime_is_given_a_provider_key_only_the_gateway_and_the_turns_token(no_keys):
    no_keys.ANTHROPIC_API_KEY = MODEL_KEY
    no_keys.LLM_API_KEY = "sk-openai-0123456789"
    claude = runtime("claude-code").process_env
    assert claude == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4181/anthropic",
        "ANTHROPIC_API_KEY": TOKEN,
        **{k: v for k, v in claude.items() if k.startswith(("CLAUDE", "DISABLE", "IS_"))},
    }
    codex = runtime("codex")
    assert codex.process_env == {"CODEX_API_KEY": TOKEN}
    assert codex.base_url == "http://127.0.0.1:4181/openai/v1"  # its provider's base_url
    opencode_env = runtime("opencode").process_env
    keys = {name for name in opencode_env if name.endswith("_KEY")}
    assert keys == {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    assert {opencode_env[k] for k in keys} == {TOKEN}
    command = runtime("command", command="true").process_env
    assert command == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4181/anthropic",
        "ANTHROPIC_API_KEY": TOKEN,
        "OPENAI_BASE_URL": "http://127.0.0.1:4181/openai/v1",
        "OPENAI_API_KEY": TOKEN,
    }
    for name in ("claude-code", "codex", "opencode", "command"):
        held = json.dumps(runtime(name, command="true").process_env)
        assert MODEL_KEY not in held and "sk-openai-0123456789" not in held, name
    builtin = runtime("builtin").client
    assert MODEL_KEY not in vars(builtin).values()


def test_the_turns_token_is_masked_in_events_as_the_keys_are(no_keys):
    no_keys.ANTHROPIC_API_KEY = MODEL_KEY
    wrapped = runtime("claude-code")
    said = {"text": f"token {TOKEN} key {MODEL_KEY}"}
    assert wrapped.redactor(said) == {"text": "token [redacted] key [redacted]"}


def test_a_modal_session_needs_a_gateway_url_modal_can_reach(no_keys):
    no_keys.ANTHROPIC_API_KEY = MODEL_KEY
    no_keys.GATEWAY_PUBLIC_URL = ""
    for name in ("claude-code", "codex", "opencode"):
        no_keys.LLM_API_KEY = "sk-openai-0123456789"
        with pytest.raises(AgentError, match="INSPECT_GATEWAY_PUBLIC_URL, which is not set"):
            validate_agent(name, backend="modal")
        validate_agent(name, backend="local-bwrap")
    # The built-in agent calls the gateway from the worker; a command may call no model.
    validate_agent("builtin", backend="modal")
    validate_agent("command", "true", backend="modal")
    no_keys.GATEWAY_PUBLIC_URL = "https://gateway.example.com"
    validate_agent("claude-code", backend="modal")


def test_opencode_is_configured_for_the_platforms_providers_and_the_sessions_model(no_keys):
    """OpenCode's whole configuration is in its environment: each configured provider with
    its base URL (OpenCode's /v1 convention) and key reference, the model declared under its
    provider (so the API, not OpenCode, judges the name), nothing from the repository."""
    no_keys.ANTHROPIC_API_KEY = MODEL_KEY
    no_keys.ANTHROPIC_BASE_URL = "http://anthropic.internal:8080"
    no_keys.LLM_API_KEY = "sk-openai-0123456789"
    no_keys.LLM_BASE_URL = "http://llm.internal:8000/v1"

    def config(model=""):
        opencode = runtime("opencode", model=model)
        return json.loads(opencode.process_env["OPENCODE_CONFIG_CONTENT"]), opencode.process_env

    default, env = config()
    assert env["OPENCODE_DISABLE_PROJECT_CONFIG"] == env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    # Each provider at the gateway's route for its wire format, whatever the upstream is.
    assert default["provider"]["anthropic"]["options"] == {
        "baseURL": "http://127.0.0.1:4181/anthropic/v1",
        "apiKey": "{env:ANTHROPIC_API_KEY}",
    }
    assert default["provider"]["inspect-llm"]["options"] == {
        "baseURL": "http://127.0.0.1:4181/openai/v1",
        "apiKey": "{env:OPENAI_API_KEY}",
    }
    assert TOKEN not in env["OPENCODE_CONFIG_CONTENT"]  # "{env:…}" references
    assert default["provider"]["inspect-llm"]["npm"] == "@ai-sdk/openai-compatible"
    # Both configured: the OpenAI-compatible endpoint is the default, as for the builtin agent.
    assert default["model"] == default["small_model"] == "inspect-llm/gpt-4.1"
    assert default["enabled_providers"] == ["anthropic", "inspect-llm"]
    claude, _ = config("claude-opus-4-1")
    assert claude["model"] == "anthropic/claude-opus-4-1"
    assert "claude-opus-4-1" in claude["provider"]["anthropic"]["models"]
    assert config("anthropic/claude-nope")[0]["model"] == "anthropic/claude-nope"
    assert config("openai/qwen3-coder")[0]["model"] == "inspect-llm/qwen3-coder"
    no_keys.LLM_PROVIDER = "anthropic"
    assert config()[0]["model"] == "anthropic/claude-sonnet-4-5"
    no_keys.LLM_API_KEY = ""
    no_keys.LLM_BASE_URL = "https://api.openai.com/v1"
    with pytest.raises(AgentError, match="no openai provider configured"):
        runtime("opencode", model="openai/gpt-4.1")


def test_turn_limits_come_from_the_settings(settings):
    settings.AGENT_MAX_STEPS, settings.AGENT_MAX_COST_USD = 7, 0.25
    limits = turn_limits()
    assert (limits.steps, limits.cost_usd, limits.tokens) == (7, 0.25, settings.AGENT_MAX_TOKENS)


def test_redaction_reaches_nested_values_and_errors():
    secret = "sk-live-abcdefghijkl"
    assert redact({"a": [f"x{secret}y", {secret: 1}], "n": 3}, [secret, "short"]) == {
        "a": ["x[redacted]y", {"[redacted]": 1}],
        "n": 3,
    }

    class Leaky(AgentRuntime):
        name = "leaky"

        def run(self, turn):
            yield AgentEvent("message", {"text": f"key={secret}"})
            raise AgentError(f"refused key {secret}")

        def stop(self):
            pass

    events = RedactingRuntime(Leaky(), [secret]).run(None)
    assert next(events).data == {"text": "key=[redacted]"}
    with pytest.raises(AgentError, match=r"refused key \[redacted\]"):
        next(events)
