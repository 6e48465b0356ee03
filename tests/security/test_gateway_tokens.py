"""Attacks on the model gateway's tokens: a turn token outlives nothing, cannot be forged or
borrowed, never reaches the provider, and the platform's key never comes back."""

from __future__ import annotations

import time
from datetime import timedelta

from django.utils import timezone

from sessions import model_access
from sessions.models import ModelAccess
from tests.gateway.conftest import ANTHROPIC_HEADERS, UPSTREAM_KEY, anthropic_body, wait_for_request
from tests.standin_model.paced import PacedModel

ENDED = "this session's model access ended; start a new turn"


def _messages(gateway, token: str):
    with gateway.client() as client:
        return client.post(
            "/anthropic/v1/messages",
            json=anthropic_body(),
            headers={**ANTHROPIC_HEADERS, "x-api-key": token},
        )


def test_a_token_copied_out_of_the_sandbox_dies_within_a_second_of_revocation(
    gateway, fresh_upstream, mint
):
    token, session = mint()
    assert _messages(gateway, token).status_code == 200
    model_access.revoke(session.pk)
    revoked_at = time.monotonic()
    while (answer := _messages(gateway, token)).status_code == 200:
        assert time.monotonic() - revoked_at < 1.5, "the revoked token still works"
        time.sleep(0.05)
    assert answer.status_code == 401
    assert answer.json()["error"]["message"] == ENDED
    assert len(fresh_upstream.model_requests()) == len(wait_for_request(session))


def test_an_expired_token_is_refused_even_unrevoked(gateway, fresh_upstream, mint):
    token, session = mint()
    ModelAccess.objects.filter(session=session).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    answer = _messages(gateway, token)
    assert answer.status_code == 401 and answer.json()["error"]["message"] == ENDED
    assert fresh_upstream.requests == []


def test_forged_tokens_are_refused(gateway, fresh_upstream, mint):
    token, _ = mint()
    stored_hash = ModelAccess.objects.get().token_sha256  # what a database reader could see
    for forged in (
        "iwt_" + "A" * 43,
        stored_hash,
        "iwt_" + stored_hash,
        token[:-1] + ("a" if token[-1] != "a" else "b"),
        token.removeprefix("iwt_"),
        UPSTREAM_KEY,  # the provider key itself is not a gateway credential
    ):
        answer = _messages(gateway, forged)
        assert answer.status_code == 401, forged
    assert fresh_upstream.requests == []


def test_a_token_is_bound_to_its_own_session_whatever_the_request_claims(
    gateway, fresh_upstream, mint, team
):
    """A runtime in one session cannot charge, or pass the model policy of, another session
    (one in another repository whose policy allows the model) by claiming it."""
    team.other_repository.allowed_models = ["claude-sonnet-4-5"]
    team.other_repository.save()
    team.repository.allowed_models = ["gpt-5"]
    team.repository.save()
    mine, my_session = mint()
    _, other_session = mint(repository=team.other_repository, user=team.outsider)
    with gateway.client() as client:
        answer = client.post(
            f"/anthropic/v1/messages?session={other_session.pk}",
            json=anthropic_body(metadata={"user_id": str(team.outsider.pk)}),
            headers={
                **ANTHROPIC_HEADERS,
                "x-api-key": mine,
                "x-inspect-session": str(other_session.pk),
                "x-inspect-repository": str(team.other_repository.pk),
            },
        )
    assert answer.status_code == 403  # my repository's policy, not the claimed one's
    (row,) = wait_for_request(my_session)
    assert (row.session_id, row.repository_id, row.user_id) == (
        my_session.pk, team.repository.pk, team.engineer.pk,
    )  # fmt: skip
    assert not other_session.model_requests.exists()
    assert fresh_upstream.requests == []


def test_the_token_never_reaches_the_provider(gateway, fresh_upstream, mint):
    token, _ = mint("opencode")
    with gateway.client() as client:
        client.post(
            "/anthropic/v1/messages", json=anthropic_body(),
            headers={**ANTHROPIC_HEADERS, "x-api-key": token, "authorization": f"Bearer {token}",
                     "cookie": f"t={token}", "proxy-authorization": f"Bearer {token}"},
        )  # fmt: skip
        client.post(
            "/openai/v1/chat/completions",
            json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": f"Bearer {token}", "openai-organization": "org-1"},
        )
        client.get("/openai/v1/models", headers={"authorization": f"Bearer {token}"})
    seen = fresh_upstream.requests
    assert len(seen) == 3
    for request in seen:
        assert token not in repr(request.headers) and token not in request.text()
        assert "cookie" not in request.headers and "proxy-authorization" not in request.headers
    assert seen[0].headers["x-api-key"] == UPSTREAM_KEY and "authorization" not in seen[0].headers
    assert seen[1].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_the_platforms_key_never_comes_back_to_the_runtime(start_gateway, upstream, mint):
    """A provider that echoes the key it was given (some OpenAI-compatible servers do) in an
    error: the runtime gets the error, without the key."""
    with PacedModel(key="sk-the-provider-wants-another-key") as echoing:
        gateway = start_gateway(echoing.url, echoing.url + "/v1")
        token, session = mint()
        with gateway.client() as client:
            anthropic = client.post(
                "/anthropic/v1/messages", json=anthropic_body(stream=True),
                headers={**ANTHROPIC_HEADERS, "x-api-key": token},
            )  # fmt: skip
            openai = client.post(
                "/openai/v1/chat/completions", json={"model": "gpt-4.1", "messages": []},
                headers={"authorization": f"Bearer {token}"},
            )  # fmt: skip
        for answer in (anthropic, openai):
            assert answer.status_code == 401
            assert UPSTREAM_KEY not in answer.text
            assert UPSTREAM_KEY not in repr(answer.headers)
            assert answer.json()["error"]["message"] == "Invalid API key: [redacted]"
        rows = wait_for_request(session, 2)
        assert all(r.outcome == "upstream_error" and UPSTREAM_KEY not in r.message for r in rows)
        assert UPSTREAM_KEY not in gateway.output()
