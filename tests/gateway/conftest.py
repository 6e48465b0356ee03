"""The gateway as it runs: its own process (`python -m gateway.server`) on this run's database,
in front of the stand-in model (tests/standin_model) as the provider; turn tokens minted the
way the runner mints them; and a wait for the request's record (written after the response)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from django.conf import settings

from tests.conftest import _stop_process, child_env
from tests.standin_model import StandinModel

# The platform's provider key: what the gateway holds and no runtime ever sees.
UPSTREAM_KEY = "sk-upstream-real-key-7f3a9c0e5b21"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class GatewayProcess:
    process: subprocess.Popen
    url: str
    socket_path: Path
    log: Path

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def socket_client(self, token: str | None = None) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.socket_path))
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(
            base_url="http://gateway", transport=transport, headers=headers, timeout=30
        )

    def rss(self) -> int:
        return psutil.Process(self.process.pid).memory_info().rss

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _wait_healthy(gateway: GatewayProcess, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gateway.process.poll() is not None:
            pytest.fail(f"the gateway exited during start-up:\n{gateway.output()}")
        try:
            if httpx.get(gateway.url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"the gateway did not answer within {timeout} s:\n{gateway.output()}")


@pytest.fixture(scope="session")
def upstream():
    """The provider (both wire formats), requiring the platform's key."""
    with StandinModel(key=UPSTREAM_KEY) as model:
        yield model


@pytest.fixture(scope="session")
def start_gateway(django_db_setup, tmp_path_factory):
    """Start a gateway process: `start(anthropic=URL, openai=URL, **env)`."""
    started: list[GatewayProcess] = []

    def start(
        anthropic: str, openai: str, socket_path: Path | None = None, **env: str
    ) -> GatewayProcess:
        home = tmp_path_factory.mktemp("gateway")
        socket_path = socket_path or home / "run" / "gateway.sock"
        port = free_port()
        log = home / "gateway.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.server"],
            env=child_env(
                **{
                    "ANTHROPIC_BASE_URL": anthropic,
                    "ANTHROPIC_API_KEY": UPSTREAM_KEY,
                    "INSPECT_LLM_BASE_URL": openai,
                    "INSPECT_LLM_API_KEY": UPSTREAM_KEY,
                    "INSPECT_GATEWAY_PORT": str(port),
                    "INSPECT_GATEWAY_SOCKET": str(socket_path),
                    **env,  # may override the above (e.g. no key: the Models page's instead)
                }
            ),
            cwd=settings.BASE_DIR,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        gateway = GatewayProcess(process, f"http://127.0.0.1:{port}", socket_path, log)
        started.append(gateway)
        _wait_healthy(gateway)
        return gateway

    yield start
    for gateway in started:
        _stop_process(gateway.process)


@pytest.fixture(scope="session")
def gateway(start_gateway, upstream) -> GatewayProcess:
    """One gateway for the run, in front of the stand-in model."""
    return start_gateway(upstream.url, upstream.openai_url)


@pytest.fixture
def fresh_upstream(upstream):
    upstream.clear()
    return upstream


@pytest.fixture
def mint(transactional_db, team):
    """`mint(runtime="claude-code", repository=None, user=None)` -> (token, session): a turn's
    token, committed (the gateway process reads it through its own connection)."""
    from sessions import model_access
    from sessions.models import Prompt, Session

    def make(runtime: str = "claude-code", repository=None, user=None):
        repository = repository or team.repository
        user = user or team.engineer
        session = Session.objects.create(
            repository=repository, creator=user, title="gateway", branch="b", agent=runtime
        )
        prompt = Prompt.objects.create(session=session, author=user, text="go", order=1)
        minted.append(session)
        return model_access.mint(session, prompt, runtime), session

    minted: list = []
    yield make
    # The gateway records a request just after its response; let those land before the test
    # database is flushed (a flush racing a record deadlocks in PostgreSQL).
    wait_until_recorded(minted)


def wait_until_recorded(sessions: list, quiet: float = 0.3, timeout: float = 10) -> None:
    from gateway.models import ModelRequest

    if not sessions:
        return
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        count = ModelRequest.objects.filter(session__in=sessions).count()
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


def wait_for_request(session, count: int = 1, timeout: float = 10):
    """The session's ModelRequest rows once `count` are recorded (records land just after the
    response ends)."""
    from gateway.models import ModelRequest

    deadline = time.monotonic() + timeout
    while True:
        rows = list(ModelRequest.objects.filter(session=session).order_by("pk"))
        if len(rows) >= count or time.monotonic() > deadline:
            assert len(rows) >= count, f"{len(rows)} of {count} requests recorded"
            return rows
        time.sleep(0.05)


ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}


def anthropic_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hello"}],
        **extra,
    }


from tests.gateway.budget_fixtures import (  # noqa: E402, F401 - budgets: admit, pages, CLI
    admin_is_site_admin,
    turn,
)
from tests.gateway.metering_fixtures import (  # noqa: E402, F401 - metering: record, replay, retention
    access,
    agent_request,
    agent_session,
    anthropic_exchange,
    client_for,
    record_committed,
    secrets_key,
    standin,
)
