"""Bad input and failures as a runtime sees them: each in its provider's error shape, with a
message the CLIs display, and each recorded whole (never half)."""

from __future__ import annotations

import asyncio
import json
import socket

import h11
import pytest

from gateway.budgets import Refusal
from gateway.connection import Responder
from gateway.forward import Forwarder
from gateway.handler import Gateway
from gateway.metering import Exchange
from tests.gateway.conftest import ANTHROPIC_HEADERS, anthropic_body, wait_for_request

ENDED = "this session's model access ended; start a new turn"


def test_an_unknown_token_gets_401_with_the_message_clis_show(gateway, fresh_upstream):
    with gateway.client() as client:
        anthropic = client.post(
            "/anthropic/v1/messages", json=anthropic_body(),
            headers={**ANTHROPIC_HEADERS, "x-api-key": "iwt_not-a-real-token"},
        )  # fmt: skip
        openai = client.post(
            "/openai/v1/chat/completions",
            json={"model": "gpt-4.1", "messages": []},
            headers={"authorization": "Bearer iwt_nope"},
        )
        missing = client.get("/openai/v1/models")
    assert anthropic.status_code == 401
    assert anthropic.json() == {
        "type": "error", "error": {"type": "authentication_error", "message": ENDED},
    }  # fmt: skip
    assert openai.status_code == missing.status_code == 401
    assert openai.json()["error"]["message"] == ENDED
    assert openai.json()["error"]["code"] == "invalid_api_key"
    assert fresh_upstream.requests == []


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/anthropic/v1/messages", b"{not json", "body"),
        ("/anthropic/v1/messages", json.dumps({"max_tokens": 5, "messages": []}), "model"),
        ("/anthropic/v1/messages", json.dumps({"model": "claude-sonnet-4-5", "messages": []}),
         "max_tokens"),
        ("/anthropic/v1/messages", json.dumps(anthropic_body(stream="yes")), "stream"),
        ("/openai/v1/chat/completions", json.dumps({"model": "gpt-4.1", "messages": "hi"}),
         "messages"),
        ("/openai/v1/responses", json.dumps({"model": 7, "input": "hi"}), "model"),
    ],
)  # fmt: skip
def test_a_malformed_request_is_400_naming_the_field(
    gateway, fresh_upstream, mint, path, body, field
):
    token, session = mint()
    with gateway.client(token) as client:
        answer = client.post(path, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"{field}: ")
    if path.startswith("/openai"):
        assert error["param"] == field
    assert fresh_upstream.requests == []
    (row,) = wait_for_request(session)
    assert (row.status, row.outcome) == (400, "bad_request")
    assert row.message.startswith(f"{field}: ")


def test_an_upstream_error_passes_through_with_its_status_and_body(gateway, fresh_upstream, mint):
    token, session = mint()
    with gateway.client() as client:
        answer = client.post(
            "/anthropic/v1/messages",
            json=anthropic_body(model="claude-unknown-9"),
            headers={**ANTHROPIC_HEADERS, "x-api-key": token},
        )
    assert answer.status_code == 404
    assert answer.json() == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: claude-unknown-9"},
    }
    (row,) = wait_for_request(session)
    assert (row.status, row.outcome, row.message) == (
        404, "upstream_error", "model: claude-unknown-9",
    )  # fmt: skip


def test_an_unreachable_upstream_is_502_with_a_clear_message(start_gateway, mint):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
    gateway = start_gateway(dead, dead + "/v1")
    token, session = mint()
    with gateway.client(token) as client:
        answer = client.post(
            "/openai/v1/chat/completions", json={"model": "gpt-4.1", "messages": []}
        )
    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    assert message.startswith(f"the model provider at {dead}/v1 could not be reached (ConnectError")
    (row,) = wait_for_request(session)
    assert (row.status, row.outcome) == (502, "unreachable")


def test_a_model_outside_the_repositorys_policy_is_refused_with_the_allowed_list(
    gateway, fresh_upstream, mint, team
):
    team.repository.allowed_models = ["claude-haiku-4-5", "gpt-5*"]
    team.repository.save()
    token, session = mint()
    with gateway.client(token) as client:
        refused = client.post(
            "/anthropic/v1/messages", json=anthropic_body(), headers=ANTHROPIC_HEADERS
        )
        allowed = client.post(
            "/openai/v1/chat/completions",
            json={"model": "gpt-5-codex", "messages": [{"role": "user", "content": "hi"}]},
        )
    with gateway.client(token) as client:
        listed = client.get("/openai/v1/models").json()["data"]
        anthropic_listed = client.get("/anthropic/v1/models", headers=ANTHROPIC_HEADERS).json()
    # A runtime's model list holds what the policy lets through, of what the provider has.
    expected = ["claude-haiku-4-5", "gpt-5-codex", "gpt-5"]
    assert [m["id"] for m in listed] == [m["id"] for m in anthropic_listed["data"]] == expected
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["type"] == "permission_error"
    assert error["message"] == (
        "model 'claude-sonnet-4-5' is not allowed for repository widgets; "
        "allowed models: claude-haiku-4-5, gpt-5*"
    )
    assert allowed.status_code == 200
    assert [r.model for r in fresh_upstream.model_requests()] == ["gpt-5-codex"]
    # Records are written concurrently, after each response: find them by what they asked.
    recorded = {(r.endpoint, r.model): r for r in wait_for_request(session, 4)}
    refused_row = recorded["messages", "claude-sonnet-4-5"]
    assert (refused_row.status, refused_row.outcome) == (403, "refused_policy")
    assert recorded["chat.completions", "gpt-5-codex"].outcome == "ok"


def test_a_malformed_model_policy_refuses_with_a_message_an_admin_can_act_on(
    gateway, fresh_upstream, mint, team
):
    team.repository.allowed_models = "gpt-5"  # a string, not a list
    team.repository.save()
    token, session = mint()
    with gateway.client(token) as client:
        answer = client.post("/openai/v1/chat/completions", json={"model": "gpt-5", "messages": []})
    assert answer.status_code == 403
    assert answer.json()["error"]["message"] == (
        "repository widgets's allowed models are not a list of model names ('gpt-5'); "
        "an admin of the repository must correct them"
    )
    assert fresh_upstream.requests == []
    assert wait_for_request(session)[0].outcome == "refused_policy"


async def _respond_with(gateway: Gateway, exchange: Exchange, refusal: Refusal) -> bytes:
    """The bytes the handler writes for `refusal`, over a real socket pair."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(
        b"POST /anthropic/v1/messages HTTP/1.1\r\nhost: g\r\ncontent-length: 0\r\n\r\n"
    )
    conn.next_event(), conn.next_event()
    await gateway._refusal(exchange, Responder(conn, writer), refusal)
    writer.close()
    await writer.wait_closed()
    theirs.settimeout(5)
    data = b""
    while chunk := theirs.recv(65536):
        data += chunk
    theirs.close()
    return data


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_budget_refusal_is_429_in_the_providers_shape_naming_the_budget(provider, team):
    refusal = Refusal(
        429, "rate_limit_error",
        "the daily budget of repository widgets ($5.00) is spent; an admin can raise it",
        "refused_budget",
    )  # fmt: skip
    exchange = Exchange(
        access=None, provider=provider, endpoint="messages", model="claude-sonnet-4-5",
        stream=False, status=0, outcome="ok", request_body=b"{}", response_body=b"",
    )  # fmt: skip
    gateway = Gateway(Forwarder(), db_threads=1)
    raw = asyncio.run(_respond_with(gateway, exchange, refusal))
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="POST", target="/", headers=[("host", "g")]))
    client.receive_data(raw)
    head, body = client.next_event(), client.next_event()
    assert head.status_code == 429
    data = json.loads(body.data)
    if provider == "anthropic":
        assert data == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": refusal.message},
        }
    else:
        assert data["error"]["message"] == refusal.message
        assert data["error"]["type"] == data["error"]["code"] == "rate_limit_error"
    assert (exchange.status, exchange.outcome) == (429, "refused_budget")
    assert exchange.message == refusal.message and exchange.response_body == body.data
