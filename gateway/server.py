"""`python -m gateway.server`: the model gateway's own process (the supervisor starts it).

It listens on TCP (INSPECT_GATEWAY_HOST:INSPECT_GATEWAY_PORT: the built-in agent on the worker,
Modal through INSPECT_GATEWAY_PUBLIC_URL) and on the Unix socket INSPECT_GATEWAY_SOCKET (local
sandboxes, through their door). Its own asyncio loop carries only model traffic, so a long
stream never shares an event loop with the web pages (docs/model-gateway.md, "Design").
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from pathlib import Path

import django

log = logging.getLogger("gateway")
# How long a stop waits for requests under way (the supervisor's own grace is 10 s).
STOP_GRACE_SECONDS = 8


class CannotListen(Exception):
    """One line for the operator: which setting, what is wrong, what to do."""


def bind_socket_path(final: Path) -> tuple[Path, Path]:
    """Where to bind the Unix socket before it takes its name: a temporary name beside it.
    The directory is created if missing (0755) but never removed or replaced: sandboxes
    bind-mount the directory itself, so the socket must appear inside the same one."""
    directory = final.parent
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o755)
    return directory / f".{final.name}.{os.getpid()}.tmp", final


async def serve(stop: asyncio.Event) -> None:
    from django.conf import settings  # why: settings are read after django.setup() in main

    from gateway.connection import serve_connection  # why: imports models, after setup
    from gateway.forward import Forwarder  # why: after setup
    from gateway.handler import Gateway  # why: imports models, after setup

    gateway = Gateway(Forwarder())
    connections: set[asyncio.Task] = set()

    async def on_client(reader, writer):
        task = asyncio.current_task()
        connections.add(task)
        try:
            await serve_connection(gateway, reader, writer)
        except asyncio.CancelledError:
            pass  # stopping: the connection is closed, nothing is waiting on this task
        finally:
            connections.discard(task)

    try:
        tcp = await asyncio.start_server(
            on_client, settings.GATEWAY_HOST, settings.GATEWAY_PORT, reuse_address=True,
            backlog=1024,
        )  # fmt: skip
    except OSError as exc:
        raise CannotListen(
            f"INSPECT_GATEWAY_PORT: cannot listen on {settings.GATEWAY_HOST}:"
            f"{settings.GATEWAY_PORT} ({exc.strerror or exc}); stop what is using it or set "
            "INSPECT_GATEWAY_PORT to another port"
        ) from None
    try:
        temporary, final = bind_socket_path(Path(settings.GATEWAY_SOCKET))
        unix = await asyncio.start_unix_server(on_client, path=str(temporary), backlog=1024)
    except OSError as exc:
        tcp.close()
        raise CannotListen(
            f"INSPECT_GATEWAY_SOCKET: cannot listen on {settings.GATEWAY_SOCKET} "
            f"({exc.strerror or exc}); a Unix socket path must be shorter than 100 characters "
            "in a directory this user can write"
        ) from None
    temporary.chmod(0o666)  # sandbox processes run as other users
    os.replace(temporary, final)  # atomic: a door never finds the name missing
    inode = final.stat().st_ino
    host = settings.GATEWAY_HOST
    shown = f"[{host}]" if ":" in host else host
    log.info("listening on http://%s:%s and %s", shown, settings.GATEWAY_PORT, final)
    try:
        await stop.wait()
    finally:
        tcp.close()
        unix.close()
        # Requests under way get a while to finish; idle keep-alive connections do not wait.
        deadline = asyncio.get_running_loop().time() + STOP_GRACE_SECONDS
        while gateway.in_flight and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        with contextlib.suppress(OSError):
            if final.stat().st_ino == inode:  # a newer gateway may own the name by now
                final.unlink()
        await gateway.drain()
        await gateway.forwarder.close()


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspect_web.settings")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per model request
    from inspect_web.env import ConfigError  # why: the shell's settings errors, one line each

    try:
        django.setup()
    except ConfigError as exc:
        print(f"inspect-web gateway: {exc}", file=sys.stderr, flush=True)
        return 2

    # The loop shares the GIL with the recording threads; by default a thread keeps it up to
    # 5 ms, which would land on a stream's first token. 0.5 ms keeps that wait small.
    sys.setswitchinterval(0.0005)
    # What start-up loaded stays: the collector then never walks Django's objects again (a
    # full collection of them took milliseconds, which a first token could wait behind).
    gc.collect()
    gc.freeze()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await serve(stop)

    try:
        asyncio.run(run())
    except CannotListen as exc:
        print(f"inspect-web gateway: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
