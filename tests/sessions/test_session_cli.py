"""`manage.py inspect session …`: --wait without a worker, `events --json` lines, and `stop`."""

import json
import time

import pytest

from sessions.models import Event, Session

pytestmark = pytest.mark.django_db

AGENT = ["--agent-command", "printf 'hi\\n' > hi.txt"]


def test_wait_without_a_worker_runs_the_turn_here_and_says_so(ready_repo, create_session):
    started = time.monotonic()
    code, summary, err = create_session("--prompt", "say hi", *AGENT, "--wait")
    assert code == 0, err
    assert "no Celery worker answered within 2 s; running the turn here" in err
    assert summary["state"] == "idle"
    assert summary["diff"]["paths"] == ["hi.txt"]
    assert time.monotonic() - started < 60


def test_events_json_prints_one_object_per_line_in_seq_order(
    ready_repo, create_session, inspect_cli
):
    _, summary, _ = create_session("--prompt", "say hi", *AGENT, "--inline")
    code, out, err = inspect_cli("session", "events", str(summary["id"]), "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in lines] == list(range(1, summary["event_count"] + 1))
    assert all(set(e) >= {"seq", "kind", "payload", "created_at"} for e in lines)
    assert lines[0]["kind"] == "prompt" and lines[0]["payload"]["text"] == "say hi"

    code, out, _ = inspect_cli("session", "events", str(summary["id"]), "--after", "3", "--json")
    assert [json.loads(line)["seq"] for line in out.splitlines()][0] == 4


def test_stop_with_nothing_running_says_so_and_changes_nothing(
    ready_repo, create_session, inspect_cli
):
    _, summary, _ = create_session("--prompt", "say hi", *AGENT, "--inline")
    before = Event.objects.filter(session_id=summary["id"]).count()
    code, _, err = inspect_cli("session", "stop", str(summary["id"]))
    assert code == 1
    assert f"session {summary['id']} has no running turn (it is idle)" in err
    assert Event.objects.filter(session_id=summary["id"]).count() == before
    assert Session.objects.get(pk=summary["id"]).state == "idle"
