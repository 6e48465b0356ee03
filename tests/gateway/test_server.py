"""The gateway process itself: where its socket appears (the rules the sandboxes' doors rely
on), what it answers besides the providers' routes, and a clean stop."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys

from django.conf import settings

from tests.conftest import child_env
from tests.gateway.conftest import ANTHROPIC_HEADERS, anthropic_body, free_port, wait_for_request


def test_the_socket_appears_in_the_directory_sandboxes_mount_without_replacing_it(
    start_gateway, upstream, tmp_path
):
    mounted = tmp_path / "gateway"
    mounted.mkdir()
    mounted.chmod(0o750)
    inode = mounted.stat().st_ino
    stale = mounted / "gateway.sock"
    stale.write_text("left by a gateway that was killed")
    first = start_gateway(upstream.url, upstream.openai_url, socket_path=stale)
    assert mounted.stat().st_ino == inode  # the same directory, never recreated
    assert stat.S_IMODE(mounted.stat().st_mode) == 0o750  # and left as it was
    assert stale.is_socket() and stat.S_IMODE(stale.stat().st_mode) == 0o666
    assert sorted(p.name for p in mounted.iterdir()) == ["gateway.sock"]  # no temporary left

    # A second gateway (a restart) takes the name over; the directory stays.
    second = start_gateway(upstream.url, upstream.openai_url, socket_path=stale)
    assert mounted.stat().st_ino == inode
    with second.socket_client() as client:
        assert client.get("/healthz").status_code == 200
    first.process.send_signal(signal.SIGTERM)
    first.process.wait(10)
    assert stale.is_socket(), "the stopping gateway removed its successor's socket"


def test_a_missing_socket_directory_is_created_readable_by_sandboxes(
    start_gateway, upstream, tmp_path
):
    path = tmp_path / "new" / "gateway" / "gateway.sock"
    gateway = start_gateway(upstream.url, upstream.openai_url, socket_path=path)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    with gateway.socket_client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}


def test_unknown_routes_get_404_in_the_callers_provider_shape(gateway, mint):
    token, _ = mint()
    with gateway.client(token) as client:
        anthropic = client.post("/anthropic/v1/complete", json={})
        openai = client.post("/openai/v1/embeddings", json={})
        wrong_method = client.get("/openai/v1/chat/completions")
        head = client.head("/anthropic")  # Claude Code's reachability probe
        health = client.head("/healthz")
    assert anthropic.status_code == 404 and anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["message"] == (
        "the model gateway has no POST /anthropic/v1/complete"
    )
    assert openai.status_code == wrong_method.status_code == 404
    assert openai.json()["error"]["type"] == "invalid_request_error"
    assert (head.status_code, head.content, health.status_code) == (404, b"", 200)
    assert "Traceback" not in gateway.output()


def test_keep_alive_serves_many_requests_on_one_connection(gateway, fresh_upstream, mint):
    token, session = mint()
    with gateway.client() as client:
        for _ in range(5):
            answer = client.post(
                "/anthropic/v1/messages", json=anthropic_body(),
                headers={**ANTHROPIC_HEADERS, "x-api-key": token},
            )  # fmt: skip
            assert answer.status_code == 200
    assert len({r.headers.get("x-forwarded-for") for r in fresh_upstream.requests}) == 1
    assert len(wait_for_request(session, 5)) == 5


def test_sigterm_stops_it_cleanly(start_gateway, upstream):
    gateway = start_gateway(upstream.url, upstream.openai_url)
    os.kill(gateway.process.pid, signal.SIGTERM)
    assert gateway.process.wait(10) == 0
    assert not gateway.socket_path.exists()
    assert "Traceback" not in gateway.output()


def test_a_taken_port_or_an_impossible_socket_stops_it_with_one_line(upstream, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "gateway.server"], capture_output=True, text=True, timeout=60,
            cwd=settings.BASE_DIR,
            env=child_env(INSPECT_GATEWAY_PORT=str(port),
                          INSPECT_GATEWAY_SOCKET=str(tmp_path / "g.sock")),
        )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(f"inspect-web gateway: INSPECT_GATEWAY_PORT: cannot listen on 127.0.0.1:{port}")
    )
    result = subprocess.run(
        [sys.executable, "-m", "gateway.server"], capture_output=True, text=True, timeout=60,
        cwd=settings.BASE_DIR,
        env=child_env(INSPECT_GATEWAY_PORT=str(free_port()),
                      INSPECT_GATEWAY_SOCKET=str(tmp_path / ("x" * 120) / "gateway.sock")),
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "inspect-web gateway: INSPECT_GATEWAY_SOCKET: cannot listen on" in result.stderr
