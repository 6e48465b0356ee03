"""The stand-in model server (tests/standin_model/) records every request, and a sandbox reaches
it through its egress proxy. Each provider's API: test_standin_model_anthropic.py and
test_standin_model_openai.py."""

from __future__ import annotations

from snapshots.sandbox.base import Limits
from tests.sessions.agents.standin_http import KEY, anthropic_body, call, user
from tests.sessions.agents.standin_sandbox import StandinSandboxes, skip_without_sandbox
from tests.standin_model import TITLE, StandinModel


# -- recording -------------------------------------------------------------------------------
def test_every_request_is_recorded_with_headers_and_body():
    with StandinModel(key=None) as standin:  # any key accepted
        call(
            standin,
            "/v1/messages",
            anthropic_body([user("create a.txt with x")]),
            key="whatever",
            anthropic=True,
        )
        call(
            standin,
            "/v1/chat/completions",
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": "title please"}]},
        )
        recorded = standin.requests
        assert [r.api for r in recorded] == ["anthropic", "chat"]
        assert recorded[0].headers["x-api-key"] == "whatever"
        assert recorded[0].model == "claude-sonnet-4-5" and recorded[0].status == 200
        assert [r.api for r in standin.requests_with_tools()] == ["anthropic"]
        assert standin.tool_calls() == ["printf '%s\\n' 'x' > a.txt"]
        assert "create a.txt with x" in recorded[0].text()


# -- from a sandbox --------------------------------------------------------------------------
SANDBOX_CLIENT = r"""
import json, os, sys, urllib.request
url, key = sys.argv[1], sys.argv[2]
body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
        "messages": [{"role": "user", "content": "hello from the sandbox"}]}
req = urllib.request.Request(url + "/v1/messages", data=json.dumps(body).encode(),
    headers={"x-api-key": key, "anthropic-version": "2023-06-01",
             "content-type": "application/json"})
with urllib.request.urlopen(req, timeout=20) as resp:  # through HTTP_PROXY, as the CLIs go
    text = resp.read().decode()
    print(os.environ.get("HTTP_PROXY"), resp.status, text.rstrip().splitlines()[-2])
"""


def test_an_allowlist_sandbox_reaches_the_standin_through_its_egress_proxy(tmp_path):
    """What the CLI tests rely on: a name only the sandbox's proxy resolves, and an operator
    exception for the stand-in's address and port (loopback is refused otherwise)."""
    skip_without_sandbox()
    with StandinModel(key=KEY) as standin:
        sandboxes = StandinSandboxes(
            tmp_path,
            None,
            {"model.test": standin},
            limits=Limits(wall_seconds=60, memory_mb=512, pids=64),
        )
        route = sandboxes.route
        box = sandboxes.create({"client.py": SANDBOX_CLIENT}, git="none")
        try:
            result = box.run(["python3", "client.py", route.url, KEY], timeout=30)
        finally:
            sandboxes.close()
        assert result.stdout.split() == [
            "http://127.0.0.1:3128",
            "200",
            "event:",
            "message_stop",
        ], result.stderr
        (seen,) = standin.model_requests()
        assert seen.headers["host"] == f"{route.name}:{standin.port}"
        assert seen.reply == {"text": TITLE}
