"""Attack: a repository secret the agent read in its sandbox (or that a tool printed) is sent
to the model in a prompt. The gateway masks it before anything leaves the platform, in every
form it is commonly encoded in, and the record is of the masked body."""

from __future__ import annotations

import base64
import hashlib
import json

from cryptography.fernet import Fernet

from approvals.redaction import Redactor
from approvals.secrets import secret_set
from tests.gateway.conftest import ANTHROPIC_HEADERS, anthropic_body, wait_for_request

SECRET = "dpl_9f8e7d6c5b4a39281706"


def test_repository_secrets_never_reach_the_provider(start_gateway, upstream, mint, team, settings):
    key = Fernet.generate_key().decode()
    settings.SECRETS_KEY = key
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=SECRET, by=team.admin)
    gateway = start_gateway(upstream.url, upstream.openai_url, INSPECT_SECRETS_KEY=key)
    token, session = mint()
    upstream.clear()
    leaked = (
        f"env says DEPLOY_TOKEN={SECRET}; hex {SECRET.encode().hex()}; "
        f"base64 {base64.b64encode(SECRET.encode()).decode()}"
    )
    raw = json.dumps(anthropic_body(messages=[{"role": "user", "content": leaked}])).encode()
    with gateway.client() as client:
        answer = client.post(
            "/anthropic/v1/messages", content=raw, headers={**ANTHROPIC_HEADERS, "x-api-key": token}
        )
    assert answer.status_code == 200
    (seen,) = upstream.requests
    sent = seen.text()
    assert SECRET not in sent
    assert SECRET.encode().hex() not in sent
    assert base64.b64encode(SECRET.encode()).decode() not in sent
    assert sent.count("[redacted]") == 3
    # What is recorded is what was forwarded: the masked body, byte for byte.
    forwarded = Redactor.for_secrets([SECRET])(raw.decode()).encode()
    assert json.loads(forwarded) == seen.body
    (row,) = wait_for_request(session)
    assert row.request_sha256 == hashlib.sha256(forwarded).hexdigest()
    assert row.request_bytes == len(forwarded)
