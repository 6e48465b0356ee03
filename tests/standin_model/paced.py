"""A stand-in provider for load and timing: every answer streams `tokens` text deltas in the
providers' own wire formats (Anthropic Messages SSE, OpenAI Chat Completions chunks),
`delay` seconds apart, written only as fast as the reader takes them (asyncio, so hundreds of
streams at once cost little). It counts the bytes it sent, so a test can see back-pressure.

A wrong key gets a 401 that echoes the key it was given, as some OpenAI-compatible servers do
(what a gateway must not hand back to its client).

``python -m tests.standin_model.paced --port 8991 --tokens 500`` serves it by hand (the gateway
benchmark runs it so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time

import h11

from .wire import sse


class PacedModel:
    def __init__(
        self,
        *,
        tokens: int = 500,
        delay: float = 0.0,
        delta: str = "tok ",
        key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.tokens, self.delay, self.delta, self.key = tokens, delay, delta, key
        self.host, self.port = host, port
        self.sent_bytes = 0
        self.streams_started = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- in a thread (tests) -----------------------------------------------------------------
    def start(self) -> PacedModel:
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self.listen())
        self._ready.set()
        self._loop.run_forever()
        # Stopped: end the streams still open, so none is left pending on a closed loop.
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        if pending:
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)

    def __enter__(self) -> PacedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving -----------------------------------------------------------------------------
    async def listen(self) -> asyncio.Server:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self._server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await _request(conn, reader)
                if request is None:
                    return
                await self._answer(conn, writer, request, body)
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.ProtocolError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _answer(self, conn, writer, request: h11.Request, raw: bytes) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        anthropic = request.target.decode().split("?")[0].endswith("/messages")
        given = headers.get("x-api-key") or headers.get("authorization", "")[7:]
        if self.key is not None and given != self.key:
            message = f"Invalid API key: {given}"
            error = (
                {"type": "error", "error": {"type": "authentication_error", "message": message}}
                if anthropic
                else {"error": {"message": message, "type": "invalid_request_error",
                                "param": None, "code": "invalid_api_key"}}
            )  # fmt: skip
            return await _whole(conn, writer, 401, error)
        body = json.loads(raw or b"{}")
        model = body.get("model", "paced")
        if not body.get("stream"):
            text = self.delta * self.tokens
            if anthropic:
                reply = {"id": "msg_paced", "type": "message", "role": "assistant", "model": model,
                         "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                         "usage": {"input_tokens": 10, "output_tokens": self.tokens}}  # fmt: skip
            else:
                reply = {"id": "chatcmpl-paced", "object": "chat.completion", "model": model,
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": text}}],
                         "usage": {"prompt_tokens": 10,
                                   "completion_tokens": self.tokens}}  # fmt: skip
            return await _whole(conn, writer, 200, reply)
        self.streams_started += 1
        head, delta, tail = (_anthropic if anthropic else _chat)(model, self.delta, self.tokens)
        response = h11.Response(
            status_code=200, headers=[("content-type", "text/event-stream; charset=utf-8")]
        )
        await self._write(writer, conn.send(response))
        await self._write(writer, conn.send(h11.Data(data=head)))
        for _ in range(self.tokens):
            if self.delay:
                await asyncio.sleep(self.delay)
            await self._write(writer, conn.send(h11.Data(data=delta)))
        await self._write(writer, conn.send(h11.Data(data=tail)))
        await self._write(writer, conn.send(h11.EndOfMessage()))

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        self.sent_bytes += len(data)
        await writer.drain()


async def _request(conn: h11.Connection, reader: asyncio.StreamReader):
    request, body = None, bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(65536))
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        else:
            return None, b""


async def _whole(conn, writer, status: int, reply: dict) -> None:
    data = json.dumps(reply).encode()
    headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
    writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
    writer.write(conn.send(h11.Data(data=data)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()


def _anthropic(model: str, text: str, tokens: int) -> tuple[bytes, bytes, bytes]:
    message = {"id": "msg_paced", "type": "message", "role": "assistant", "model": model,
               "content": [], "stop_reason": None,
               "usage": {"input_tokens": 10, "output_tokens": 1}}  # fmt: skip
    head = sse("message_start", {"type": "message_start", "message": message}) + sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    delta = sse(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    )
    tail = (
        sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        + sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": tokens},
            },
        )  # fmt: skip
        + sse("message_stop", {"type": "message_stop"})
    )
    return head, delta, tail


def _chat(model: str, text: str, tokens: int) -> tuple[bytes, bytes, bytes]:
    def chunk(delta: dict, finish: str | None = None, **extra) -> bytes:
        return sse(None, {"id": "chatcmpl-paced", "object": "chat.completion.chunk",
                          "created": int(time.time()), "model": model,
                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                          **extra})  # fmt: skip

    usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens}
    tail = chunk({}, "stop") + chunk({}, None, usage=usage) + sse(None, "[DONE]")
    return chunk({"role": "assistant", "content": ""}), chunk({"content": text}), tail


def main() -> None:
    parser = argparse.ArgumentParser(description="A stand-in provider streaming N tokens.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8991)
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--key", default=None)
    args = parser.parse_args()
    model = PacedModel(
        tokens=args.tokens, delay=args.delay, key=args.key, host=args.host, port=args.port
    )

    async def serve() -> None:
        server = await model.listen()
        print(f"paced stand-in model on {model.url}", flush=True)
        await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
