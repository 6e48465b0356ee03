"""The `inspect` console script end to end: a live daphne, a real Celery worker, the `command`
agent, and the client run as a subprocess, as a person runs it in a terminal."""

from __future__ import annotations

import json
import signal
import stat

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_login_verifies_the_token_and_keeps_it_private(inspect, server, team):
    from api.tokens import token_create

    bad = inspect("login", server, "--token", "insp_wrong")
    assert bad.returncode == 3
    assert bad.stderr.startswith("inspect: ") and "refused the token" in bad.stderr
    assert "Traceback" not in bad.stderr and not inspect.config.exists()

    _, token = token_create(user=team.engineer, name="cli")
    result = inspect("login", server, "--token", token)
    assert result.returncode == 0, result.stderr
    assert "as engineer" in result.stdout
    assert stat.S_IMODE(inspect.config.stat().st_mode) == 0o600
    assert json.loads(inspect.config.read_text()) == {"url": server, "token": token}


def test_commands_before_login_or_against_no_server_fail_in_one_line(inspect, tmp_path):
    result = inspect("sessions")
    assert result.returncode == 3
    assert result.stderr == "inspect: not logged in: run `inspect login URL` first\n"
    result = inspect("login", "http://127.0.0.1:9", "--token", "insp_x")
    assert result.returncode == 3 and "cannot reach http://127.0.0.1:9" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_run_watch_streams_the_turn_and_exits_0_when_verification_passes(
    logged_in, ready_repo, start_celery
):
    start_celery("worker")
    result = logged_in(
        "run", "widgets", "say hello", "--watch", "--agent-command", 'echo "turn: $INSPECT_PROMPT"'
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("http://127.0.0.1:") and "/sessions/" in lines[0]
    assert "engineer asked (prompt 1): say hello" in result.stdout
    assert "turn: say hello" in result.stdout
    assert "✓ verify $ test -f README.md" in result.stdout
    assert "verification passed" in lines[-1]
    assert "\033[" not in result.stdout  # not a terminal: no colour codes

    session_id = lines[0].rstrip("/").rsplit("/", 1)[-1]
    listed = logged_in("sessions")
    assert listed.returncode == 0 and f"#{session_id}" in listed.stdout and "idle" in listed.stdout

    follow = logged_in("prompt", session_id, "again, please", "--watch")
    assert follow.returncode == 0, follow.stdout + follow.stderr
    assert "Prompt 2 queued" in follow.stdout and "turn: again, please" in follow.stdout

    watched = logged_in("watch", session_id)  # already done: replays, then stops
    assert watched.returncode == 0 and watched.stdout.count("turn: ") == 2
    stop = logged_in("stop", session_id)
    assert stop.returncode == 0 and "Nothing is running." in stop.stdout


def test_run_watch_exits_1_when_verification_fails(logged_in, ready_repo, start_celery):
    start_celery("worker")
    result = logged_in("run", "widgets", "break it", "--watch", "--agent-command", "rm README.md")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "✗ verify $ test -f README.md" in result.stdout
    assert "verification failed: test -f README.md" in result.stdout


def test_refusals_are_one_line_with_exit_3(logged_in, team):
    result = logged_in("run", "gadgets", "hi", "--agent-command", "true")
    assert result.returncode == 3
    assert "no repository named 'gadgets' that you are a member of" in result.stderr
    result = logged_in("run", "widgets", "  ", "--agent-command", "true")
    assert result.returncode == 3 and "the prompt is empty" in result.stderr
    assert "Traceback" not in result.stderr
    result = logged_in("watch", "999999")
    assert result.returncode == 3 and "not a member of its repository" in result.stderr


def test_run_watch_exits_4_when_the_session_fails(logged_in, team, start_celery):
    start_celery("worker")  # `widgets` has no snapshot here, so the turn cannot start
    result = logged_in("run", "widgets", "hi", "--watch", "--agent-command", "true")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "→ failed" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("session #")
    assert " failed: " in result.stdout.splitlines()[-1]


def test_ctrl_c_while_watching_exits_130_and_leaves_the_session_running(
    logged_in, ready_repo, start_celery
):
    start_celery("worker")
    started = logged_in("run", "widgets", "take your time", "--agent-command", "sleep 20")
    session_id = started.stdout.strip().rstrip("/").rsplit("/", 1)[-1]
    watching = logged_in.start("watch", session_id)
    assert watching.stdout.readline()  # it is following the session
    watching.send_signal(signal.SIGINT)
    assert watching.wait(timeout=10) == 130
    assert "Traceback" not in watching.stderr.read()
    listed = logged_in("sessions")
    assert f"#{session_id}" in listed.stdout and "idle" not in listed.stdout  # still running
    logged_in("stop", session_id)
