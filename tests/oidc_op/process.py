"""Start the test OpenID provider (serve.py) as a second process on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Provider:
    issuer: str
    client_id: str
    client_secret: str


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_provider(
    data: Path, redirect_uri: str, users: list[tuple[str, str, str]]
) -> Iterator[Provider]:
    """The provider with one confidential client for `redirect_uri` and `users`
    (username, e-mail, password); stopped on exit."""
    port = free_port()
    site = f"http://127.0.0.1:{port}"
    provider = Provider(f"{site}/openid", "inspect-web-test", "test-client-secret-0123456789")
    data.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.oidc_op.settings",
        "OIDC_OP_DATA": str(data),
        "OIDC_OP_SITE_URL": site,
    }
    args = [str(port), provider.client_id, provider.client_secret, redirect_uri]
    args += [":".join(user) for user in users]
    with open(data / "provider.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.oidc_op.serve", *args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if requests.get(
                        f"{provider.issuer}/.well-known/openid-configuration", timeout=2
                    ).ok:
                        break
                except requests.RequestException:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the test provider did not start: {(data / 'provider.log').read_text()}"
                    )
                time.sleep(0.3)
            yield provider
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
