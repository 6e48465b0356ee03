"""The quick start's run command: the whole system from nothing, then stopped with Ctrl-C."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def supervisor_env(data_dir: Path, port: int, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG"}}
    return {**keep, "INSPECT_DATA_DIR": str(data_dir), "INSPECT_PORT": str(port),
            "INSPECT_GATEWAY_PORT": str(free_port()), **extra}  # fmt: skip


def start(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "inspect_web.supervisor"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_until_up(process: subprocess.Popen, timeout: float = 120) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            pytest.fail("supervisor exited before coming up:\n" + "".join(lines))
        lines.append(line)
        if "Inspect Web is up at" in line:
            return lines
    pytest.fail("supervisor did not come up:\n" + "".join(lines))


def stop(process: subprocess.Popen) -> tuple[int, list[psutil.Process]]:
    code, alive, _ = stop_reading(process)
    return code, alive


def stop_reading(process: subprocess.Popen) -> tuple[int, list[psutil.Process], str]:
    """Stop the supervisor; also what it printed since the last read."""
    children = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGINT)
    rest = process.stdout.read()
    code = process.wait(timeout=30)
    _, alive = psutil.wait_procs(children, timeout=5)
    return code, alive, rest


def log_in(base: str, username: str, password: str) -> requests.Session:
    browser = requests.Session()
    browser.get(base + "accounts/login/", timeout=10)
    browser.post(
        base + "accounts/login/",
        data={
            "login": username,
            "password": password,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        headers={"Referer": base + "accounts/login/"},
        timeout=10,
    )
    return browser


def test_it_brings_the_whole_system_up_and_ctrl_c_leaves_no_orphans(tmp_path):
    port = free_port()
    process = start(supervisor_env(tmp_path, port))
    try:
        lines = wait_until_up(process)
        output = "".join(lines)
        assert f"Inspect Web is up at http://127.0.0.1:{port}/" in output
        password_file = re.search(r"its password is in (\S+)", output).group(1)
        password = Path(password_file).read_text().strip()
        assert Path(password_file).stat().st_mode & 0o777 == 0o600

        base = f"http://127.0.0.1:{port}/"
        browser = log_in(base, "admin", password)
        home = browser.get(base, timeout=10)
        assert home.status_code == 200
        assert "Welcome, admin" in home.text
        assert browser.get(base + "static/css/app.css", timeout=10).status_code == 200

        names = {" ".join(p.cmdline()) for p in psutil.Process(process.pid).children(True)}
        assert any("inspect_web.web_server" in n for n in names)  # daphne, log redacted
        assert any("celery" in n and " worker" in n for n in names)
        assert any("celery" in n and " beat" in n for n in names)
        assert any("redis-server" in n for n in names)
        assert any("gateway.server" in n for n in names)

        # The model gateway is up on its port and its socket (an unknown token: 401).
        gateway = f"http://127.0.0.1:{env_gateway_port(output)}"
        assert f"Model gateway: {gateway} and {tmp_path}/gateway/gateway.sock" in output
        assert requests.get(gateway + "/healthz", timeout=10).status_code == 200
        refused = requests.get(gateway + "/openai/v1/models", timeout=10)
        assert refused.status_code == 401
        assert (tmp_path / "gateway" / "gateway.sock").is_socket()
        for name in ("daphne", "gateway", "worker", "beat"):
            assert re.search(rf"^{name}: +started \(pid \d+\), log ", output, re.M), name
        time.sleep(12)  # the beat's 5-second tasks run a few times
    finally:
        code, alive, rest = stop_reading(process)
    assert code == 0
    assert alive == []
    # Periodic task chatter goes to the data dir's log/, not the console.
    console = output + rest
    assert "watch_sessions" not in console and "succeeded in" not in console
    worker_log = (tmp_path / "log" / "worker.log").read_text()
    assert "watch_sessions" in worker_log + (tmp_path / "log" / "beat.log").read_text()
    assert (tmp_path / "log" / "daphne.log").read_text()  # the access log of the requests above

    # A second run reuses the data dir: same admin, no new password, and it comes up again.
    process = start(supervisor_env(tmp_path, port))
    try:
        output = "".join(wait_until_up(process))
        assert "Created the admin account" not in output
        assert Path(password_file).read_text().strip() == password
    finally:
        code, alive = stop(process)
    assert (code, alive) == (0, [])


def env_gateway_port(output: str) -> int:
    return int(re.search(r"Model gateway: http://127\.0\.0\.1:(\d+) ", output).group(1))


def run_to_failure(env: dict[str, str]) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-m", "inspect_web.supervisor"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, result.stderr


def test_a_port_in_use_is_reported_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stderr = run_to_failure(supervisor_env(tmp_path, port))
    assert code == 2
    assert "Traceback" not in stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith(f"inspect-web: INSPECT_PORT: port {port} on 127.0.0.1 is already in use")
    )


def test_unreachable_redis_stops_start_up_naming_the_variable(tmp_path):
    env = supervisor_env(tmp_path, free_port(), REDIS_URL="redis://127.0.0.1:1/0")
    code, stderr = run_to_failure(env)
    assert code == 2
    assert "Traceback" not in stderr
    assert "inspect-web: REDIS_URL: cannot reach Redis at redis://127.0.0.1:1/0" in stderr


def test_unreachable_database_stops_start_up_naming_the_variable(tmp_path):
    env = supervisor_env(
        tmp_path, free_port(), DATABASE_URL="postgres://postgres@127.0.0.1:1/inspect"
    )
    code, stderr = run_to_failure(env)
    assert code == 2
    assert "Traceback" not in stderr
    assert "inspect-web: DATABASE_URL: cannot connect to the database" in stderr


def test_a_malformed_setting_stops_start_up_naming_the_variable(tmp_path):
    code, stderr = run_to_failure(supervisor_env(tmp_path, free_port(), DEBUG="sometimes"))
    assert code == 2
    assert stderr.strip() == (
        "inspect-web: DEBUG: 'sometimes' is not a boolean; use 1/0, true/false, yes/no or on/off"
    )
