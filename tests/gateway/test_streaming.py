"""Streams as they pass: a slow provider holds up no one else, a slow reader slows the provider
read instead of filling the gateway's memory, and a runtime that leaves mid-stream is recorded
as gone."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time

import httpx

from gateway.forward import relay
from tests.gateway.conftest import ANTHROPIC_HEADERS, UPSTREAM_KEY, anthropic_body, wait_for_request
from tests.standin_model.paced import PacedModel


def test_a_slow_upstream_does_not_block_another_sessions_stream(start_gateway, upstream, mint):
    with PacedModel(tokens=20, delay=0.25, key=UPSTREAM_KEY) as slow:
        gateway = start_gateway(slow.url, upstream.openai_url)
        slow_token, slow_session = mint()
        fast_token, fast_session = mint("codex")
        slow_done = threading.Event()
        slow_chunks: list[float] = []

        def slow_stream() -> None:
            with gateway.client() as client, client.stream(
                "POST", "/anthropic/v1/messages", json=anthropic_body(stream=True),
                headers={**ANTHROPIC_HEADERS, "x-api-key": slow_token},
            ) as answer:  # fmt: skip
                for _ in answer.iter_raw():
                    slow_chunks.append(time.monotonic())
            slow_done.set()

        thread = threading.Thread(target=slow_stream)
        thread.start()
        deadline = time.monotonic() + 10
        while not slow_chunks and time.monotonic() < deadline:
            time.sleep(0.02)
        assert slow_chunks, "the slow stream never started"

        took = []
        with gateway.client(fast_token) as client:
            for _ in range(5):
                started = time.monotonic()
                answer = client.post(
                    "/openai/v1/chat/completions",
                    json={"model": "gpt-4.1", "stream": True,
                          "messages": [{"role": "user", "content": "hi"}]},
                )  # fmt: skip
                took.append(time.monotonic() - started)
                assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
        assert not slow_done.is_set(), "the slow stream should still be running"
        assert max(took) < 1.0, took
        thread.join(15)
        assert slow_done.is_set()
        assert len(wait_for_request(fast_session, 5)) == 5
        (slow_row,) = wait_for_request(slow_session)
        assert slow_row.outcome == "ok" and slow_row.output_tokens == 20
        assert slow_row.latency_ms > 20 * 250 * 0.9


def test_a_slow_reader_slows_the_upstream_and_the_gateway_memory_stays_bounded(
    start_gateway, upstream, mint
):
    delta = "x" * 16_000  # 16 KB per event, 4,000 events: 64 MB if nothing held it back
    with PacedModel(tokens=4000, delta=delta, key=UPSTREAM_KEY) as big:
        gateway = start_gateway(big.url, upstream.openai_url)
        token, session = mint()
        baseline = gateway.rss()
        body = anthropic_body(stream=True)
        with socket.create_connection(("127.0.0.1", int(gateway.url.rsplit(":", 1)[1]))) as raw:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            request = httpx.Request(
                "POST", gateway.url + "/anthropic/v1/messages", json=body,
                headers={**ANTHROPIC_HEADERS, "x-api-key": token},
            )  # fmt: skip
            head = "".join(f"{k}: {v}\r\n" for k, v in request.headers.items())
            raw.sendall(
                f"POST /anthropic/v1/messages HTTP/1.1\r\n{head}\r\n".encode() + request.read()
            )
            received = len(raw.recv(1024 * 1024))
            # The reader stops; the provider keeps wanting to send.
            time.sleep(2)
            stalled_at = big.sent_bytes
            peak = gateway.rss()
            time.sleep(1)
            assert big.sent_bytes - stalled_at < 1024 * 1024, "the upstream kept being read"
            assert stalled_at < 24 * 1024 * 1024, stalled_at
            assert peak - baseline < 32 * 1024 * 1024, (baseline, peak)
            # Reading slowly, it keeps flowing.
            deadline = time.monotonic() + 20
            while big.sent_bytes == stalled_at and time.monotonic() < deadline:
                received += len(raw.recv(256 * 1024))
            assert big.sent_bytes > stalled_at
        # The reader went away mid-stream: recorded as such, hashed up to where it stopped.
        (row,) = wait_for_request(session)
        assert (row.status, row.outcome) == (200, "client_gone")
        assert received <= row.response_bytes < 64 * 1024 * 1024


def test_a_long_response_keeps_only_its_head_but_hashes_all_of_it(start_gateway, upstream, mint):
    with PacedModel(tokens=200, delta="y" * 8000, key=UPSTREAM_KEY) as big:
        gateway = start_gateway(big.url, upstream.openai_url)
        token, session = mint()
        with gateway.client() as client:
            answer = client.post(
                "/anthropic/v1/messages", json=anthropic_body(stream=True),
                headers={**ANTHROPIC_HEADERS, "x-api-key": token},
            )  # fmt: skip
        assert answer.status_code == 200 and len(answer.content) > 1_600_000
        (row,) = wait_for_request(session)
        assert row.response_bytes == len(answer.content)
        assert row.response_sha256 == hashlib.sha256(answer.content).hexdigest()
        assert row.output_tokens == 200


def test_a_slow_reader_gets_the_whole_stream_to_its_end(start_gateway, upstream, mint):
    """The provider finishes while the runtime is still reading what the gateway holds: every
    byte still reaches it, and the stream ends properly."""
    with PacedModel(tokens=2000, delta="z" * 8000, key=UPSTREAM_KEY) as big:
        gateway = start_gateway(big.url, upstream.openai_url)
        token, session = mint()
        # A small receive buffer, so the gateway's writes wait for this reader (16 MB in all).
        small = httpx.HTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)])
        with gateway.client(transport=small) as client, client.stream(
            "POST", "/anthropic/v1/messages", json=anthropic_body(stream=True),
            headers={**ANTHROPIC_HEADERS, "x-api-key": token},
        ) as answer:  # fmt: skip
            received = bytearray()
            for piece in answer.iter_raw(64 * 1024):
                received += piece
                time.sleep(0.002)  # slower than the provider sends
        assert received.count(b"event: content_block_delta") == 2000
        assert received.rstrip().endswith(b'data: {"type": "message_stop"}')
        (row,) = wait_for_request(session)
        assert (row.outcome, row.response_bytes) == ("ok", len(received))


def test_the_relay_ends_when_the_provider_finished_while_the_client_was_being_written():
    """The provider's last chunk and its end arrive while the previous write to a slow client
    is still under way: the relay must still send that chunk and then end."""

    async def provider():
        for part in (b"first ", b"second ", b"last"):
            yield part
            await asyncio.sleep(0.01)

    async def run() -> bytes:
        sent = []

        async def slow_client(data: bytes) -> None:
            sent.append(data)
            await asyncio.sleep(0.1)

        seen = []
        await asyncio.wait_for(relay(provider(), slow_client, seen.append), 5)
        assert b"".join(seen) == b"first second last"
        return b"".join(sent)

    assert asyncio.run(run()) == b"first second last"
