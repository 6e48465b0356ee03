"""The `inspect` console script run as a subprocess against a live daphne, with a config dir of
its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.conftest import forget_stop_requests  # noqa: F401 - autouse fixture
from tests.sessions.stream.conftest import running_daphne

INSPECT = str(Path(sys.executable).parent / "inspect")


@pytest.fixture
def server(transactional_db, tmp_path):
    with running_daphne(tmp_path / "daphne.log") as daphne:
        yield daphne.http_url.rstrip("/")


@pytest.fixture
def inspect(tmp_path):
    """Run the console script with a config dir of its own; returns the CompletedProcess."""
    home = tmp_path / "home"
    home.mkdir()

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CONFIG_HOME": str(home / "cfg")}
        return subprocess.run(
            [INSPECT, *args], env=env, capture_output=True, text=True, timeout=timeout
        )

    def start(*args: str) -> subprocess.Popen:
        """The console script running in the background (to interrupt it)."""
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CONFIG_HOME": str(home / "cfg")}
        return subprocess.Popen(
            [INSPECT, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    run.config = home / "cfg" / "inspect" / "config.json"
    run.start = start
    return run


@pytest.fixture
def logged_in(inspect, server, team):
    from api.tokens import token_create

    _, token = token_create(user=team.engineer, name="cli")
    result = inspect("login", server, "--token", token)
    assert result.returncode == 0, result.stderr
    return inspect
