"""The real Codex CLI (the platform's pinned @openai/codex) in a real sandbox with egress `none`,
against the stand-in model over the OpenAI Responses API, reached only through the model gateway
(the sandbox's door, the turn's token as its key; every call metered): a change, a follow-up by
another person that refers to it (resumed from the session's snapshot), a refused model, usage
with a cost, warnings as notices, a token that is no longer valid, an unreachable API, images."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import struct
import time
import zlib

import pytest

from sessions.agents import pricing
from sessions.agents.base import Author, Conversation, Image, Turn, TurnLimits
from sessions.agents.codex import KEY_ENV, CodexAgent, process_env
from tests.gateway.conftest import UPSTREAM_KEY, wait_for_request

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
    pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed"),
    # The turn's token is committed: the gateway process checks it through its own connection.
    pytest.mark.django_db(transaction=True),
]

KEY = "sk-codex-real-" + secrets.token_hex(12)
ADA = Author(username="engineer", name="Ada Engineer", email="ada@example.com")
GRACE = Author(username="reviewer", name="Grace Reviewer", email="grace@example.com")


def png(width: int = 4, height: int = 4) -> bytes:
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def sandboxes(gateway_boxes):
    """Sandboxes reaching models only through the gateway, from a committed repository
    (``sandboxes.base``)."""
    gateway_boxes.base = gateway_boxes.snapshot({"README.md": "# widgets\n"}, git="commit")
    return gateway_boxes


@pytest.fixture
def standin(sandboxes):
    """The provider behind the gateway."""
    return sandboxes.standin


@pytest.fixture
def box(sandboxes, standin):
    standin.clear()
    sandbox = sandboxes.restore(sandboxes.base)
    yield sandbox
    sandbox.terminate()


def codex(sandboxes, *, model: str = "gpt-5-codex", token: str = ""):
    """Codex for a new turn: the gateway as its provider, the turn's token as its key (or
    `token` instead)."""
    env = process_env(sandboxes.turn_route("codex"))
    if token:
        env[KEY_ENV] = token
    return CodexAgent(env=env, model=model)


def turn(sandbox, prompt: str, author: Author = ADA, **kwargs) -> Turn:
    kwargs.setdefault("limits", TurnLimits(wall_seconds=300))
    return Turn(sandbox=sandbox, prompt=prompt, author=author, **kwargs)


def of_kind(events, kind):
    return [e.data for e in events if e.kind == kind]


def request_text(request) -> str:
    return json.dumps(request.body)


def test_a_change_then_another_users_undo_resumes_the_thread_from_the_snapshot(
    sandboxes, box, standin, settings
):
    settings.LLM_MODEL = ""
    settings.AGENT_MODELS = {}
    conversation = Conversation()
    first = list(
        codex(sandboxes, model="").run(
            turn(box, "create notes.txt with hello", conversation=conversation)
        )
    )
    assert first[-1].kind == "done" and "failed" not in first[-1].data, first
    assert of_kind(first, "error") == []
    assert box.read_file("notes.txt") == b"hello\n"
    assert conversation.resume_id  # Codex's thread, from thread.started
    # Codex warns that it has no metadata for the model: a notice, not an error.
    assert any("Model metadata" in n["message"] for n in of_kind(first, "notice"))
    (usage1,) = of_kind(first, "usage")
    # No model was named: the configured default is passed, so usage has a model and a cost.
    assert usage1["model"] == "gpt-5-codex"
    assert usage1["input_tokens"] > 1000 and usage1["output_tokens"] > 0
    assert usage1["cost_usd"] == pricing.cost_usd(
        "gpt-5-codex", usage1["input_tokens"], usage1["output_tokens"]
    )
    assert usage1["cost_usd"] > 0
    first_requests = standin.model_requests()
    assert {r.model for r in first_requests} == {"gpt-5-codex"}
    # The provider saw the platform's key, never the token; the gateway metered the calls.
    assert all(r.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for r in first_requests)
    metered = wait_for_request(sandboxes.sessions[0], len(first_requests))
    assert {r.runtime for r in metered} == {"codex"}

    # The next turn runs where the session's snapshot is restored, as the runner does.
    snapshot = box.snapshot()
    standin.clear()
    later = sandboxes.restore(snapshot)
    try:
        second = list(
            codex(sandboxes, model="").run(
                turn(later, "undo what you just did", GRACE, conversation=conversation)
            )
        )
        gone = later.run(["test", "-e", "/workspace/notes.txt"])
    finally:
        later.terminate()
    assert second[-1].kind == "done" and "failed" not in second[-1].data, second
    assert gone.exit_code == 1  # undone
    requests = standin.model_requests()
    # The model saw turn 1 (its prompt and its own call) and who asks now.
    asked = request_text(requests[0])
    assert "create notes.txt with hello" in asked and "printf" in asked
    assert "Grace Reviewer (reviewer)" in asked and "undo what you just did" in asked
    assert standin.tool_calls() == ["rm notes.txt"]
    # Codex reports the thread's totals; the turn's own usage is about one turn's worth.
    (usage2,) = of_kind(second, "usage")
    assert 0 < usage2["input_tokens"] < 1.5 * usage1["input_tokens"]
    assert 0 < usage2["output_tokens"] < 1.5 * usage1["output_tokens"]


def test_a_refused_model_fails_the_turn_with_the_providers_words(sandboxes, box):
    events = list(codex(sandboxes, model="gpt-9-nope").run(turn(box, "create notes.txt with hi")))
    said = "Codex: The model `gpt-9-nope` does not exist or you do not have access to it."
    assert events[-1].data.get("failed") == said
    assert of_kind(events, "error") == [{"message": said}]


def test_a_token_that_is_not_valid_fails_with_the_gateways_words(sandboxes, box):
    """A token copied from an ended turn (here: one never minted) is refused by the gateway,
    and Codex shows the gateway's message."""
    events = list(
        codex(sandboxes, token="iwt_" + "x" * 43).run(turn(box, "create notes.txt with hi"))
    )
    (error,) = of_kind(events, "error")
    assert "401" in error["message"], error
    assert "this session's model access ended; start a new turn" in error["message"]
    assert events[-1].data["failed"] == error["message"]
    assert sandboxes.standin.model_requests() == []  # nothing reached the provider


def test_images_reach_the_model(sandboxes, box, standin):
    picture = png()
    events = list(
        codex(sandboxes).run(
            turn(
                box,
                "create notes.txt with hello",
                images=(Image(name="red.png", media_type="image/png", data=picture),),
            )
        )
    )
    assert "failed" not in events[-1].data, events
    first = standin.model_requests()[0]
    images = [
        part
        for item in first.body["input"]
        if isinstance(item, dict)
        for part in (item.get("content") or [])
        if isinstance(part, dict) and part.get("type") == "input_image"
    ]
    assert len(images) == 1
    url = images[0]["image_url"]
    assert url.startswith("data:image/")
    assert base64.b64decode(url.partition(",")[2]).startswith(b"\x89PNG")


def test_an_unreachable_api_is_abandoned_after_codexs_retries_not_at_the_wall_limit(
    tmp_path, platform_clis
):
    # A backend of its own: after this, that backend's next sandbox could not reach the
    # stand-in either ("No route to host" from its egress proxy), a sandbox-layer problem.
    from snapshots.sandbox.base import NetworkPolicy
    from snapshots.sandbox.local import LocalBackend

    backend = LocalBackend(tmp_path / "sb", tools_dir=platform_clis)
    src = tmp_path / "src"
    src.mkdir()
    (src / "README.md").write_text("# widgets\n")
    ref = backend.snapshot_from_directory(str(src))
    box = backend.create(snapshot=ref, network=NetworkPolicy("allowlist", ("model.test",)))
    agent = CodexAgent(env={"CODEX_API_KEY": KEY}, base_url="https://blocked.test/v1")
    started = time.monotonic()
    try:
        events = list(agent.run(turn(box, "create notes.txt with hi")))
    finally:
        box.terminate()
    took = time.monotonic() - started
    failed = events[-1].data["failed"]
    assert failed.startswith("Codex cannot reach the model API at https://blocked.test/v1 (")
    assert "egress" in failed
    assert took < 120, took  # the wall limit is 300 s
    assert any("waiting for network" in n["message"] for n in of_kind(events, "notice"))
