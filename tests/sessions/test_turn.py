import json

import pytest

from sessions.models import Event, Prompt, Session

pytestmark = pytest.mark.django_db

AGENT = 'echo "working on: $INSPECT_PROMPT"; echo "note" >&2; printf "hello\\n" > greeting.txt'


def kinds(session_id):
    return list(Event.objects.filter(session_id=session_id).values_list("kind", flat=True))


def test_a_turn_runs_the_agent_captures_the_diff_verifies_and_goes_idle(ready_repo, create_session):
    code, summary, err = create_session(
        "--prompt", "add a greeting", "--agent-command", AGENT, "--inline"
    )
    assert code == 0, err
    assert summary["state"] == "idle"
    assert summary["diff"] == {"files": 1, "added": 1, "removed": 0, "paths": ["greeting.txt"]}
    for key in ["queue_ms", "restore_ms", "sync_ms", "first_event_ms", "turn_ms"]:
        assert summary["timings"][key] is not None and summary["timings"][key] >= 0
    events = list(Event.objects.filter(session_id=summary["id"]).order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # gap-free
    assert summary["event_count"] == len(events)
    statuses = [e.payload["to"] for e in events if e.kind == "state"]
    assert statuses == ["provisioning", "syncing", "running", "verifying", "idle"]
    output = [e.payload["text"] for e in events if e.kind == "output"]
    assert "working on: add a greeting" in output and "note" in output
    diff = next(e.payload for e in events if e.kind == "diff")
    assert diff["path"] == "greeting.txt" and "+hello" in diff["patch"]
    verify = [e.payload for e in events if e.kind == "command"]
    assert [(v["command"], v["exit_code"], v["ok"]) for v in verify] == [
        ("test -f README.md", 0, True),
        ("echo checked", 0, True),
    ]
    assert verify[1]["output_head"] == "checked\n"
    assert kinds(summary["id"])[0] == "prompt"
    # The totals the metrics read, kept on the session.
    from sessions.models import Session

    session = Session.objects.get(pk=summary["id"])
    assert session.verify_ok is True and session.retries == 0 and session.cost_usd == 0
    assert session.sandbox_seconds == pytest.approx(summary["timings"]["turn_ms"] / 1000)
    assert session.start_ms >= summary["timings"]["first_event_ms"]
    assert session.snapshot_age_s is not None


def test_the_setup_output_is_not_part_of_the_diff(ready_repo, create_session):
    _, summary, _ = create_session("--prompt", "nothing", "--agent-command", "true", "--inline")
    assert summary["diff"]["paths"] == []


def test_caches_left_by_running_the_code_are_not_part_of_the_diff(ready_repo, create_session):
    agent = "printf 'X = 1\\n' > mod.py && python3 -c 'import mod' && mkdir .pytest_cache"
    code, summary, err = create_session("--prompt", "add mod", "--agent-command", agent, "--inline")
    assert code == 0, err
    assert summary["diff"]["paths"] == ["mod.py"]


def test_the_commit_is_authored_by_the_prompts_author_with_the_agent_as_co_author(
    ready_repo, create_session, inspect_cli
):
    _, summary, _ = create_session(
        "--prompt", "add a greeting", "--agent-command", AGENT, "--inline", "--as", "engineer"
    )
    prompt = Prompt.objects.get(session_id=summary["id"])
    assert len(prompt.commit) == 40
    code, out, _ = inspect_cli("session", "events", str(summary["id"]), "--json")
    diff = [json.loads(line) for line in out.splitlines() if '"kind": "diff"' in line][0]
    assert diff["payload"]["author"] == "engineer"
    assert diff["payload"]["commit"] == prompt.commit


def test_a_failing_verify_command_is_recorded_and_the_session_still_goes_idle(
    ready_repo, create_session
):
    ready_repo.upstream.commit({".inspect/environment.toml": 'verify = ["echo bad; exit 4"]\n'})
    from django.core.management import call_command

    call_command("inspect", "snapshot", "refresh", "widgets", "--json")
    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")
    assert summary["state"] == "idle"
    verify = Event.objects.get(session_id=summary["id"], kind="command").payload
    assert (verify["exit_code"], verify["ok"], verify["output_head"]) == (4, False, "bad\n")


def test_an_agent_that_fails_fails_the_turn_with_its_message_and_keeps_its_work(
    ready_repo, create_session
):
    _, summary, _ = create_session(
        "--prompt", "x", "--agent-command", "echo half > half.txt; exit 9", "--inline"
    )
    assert summary["state"] == "failed"
    assert summary["error"] == "the agent command exited with status 9"
    error = Event.objects.get(session_id=summary["id"], kind="error").payload
    assert error["message"] == "the agent command exited with status 9"
    # The half-done work was committed as the turn's and kept in the session's snapshot.
    diff = Event.objects.get(session_id=summary["id"], kind="diff").payload
    assert diff["path"] == "half.txt" and "+half" in diff["patch"]
    assert Session.objects.get(pk=summary["id"]).session_snapshot_ref


def test_a_session_on_a_repository_without_snapshot_fails_with_the_fix(
    team, create_session, make_git_repo
):
    _, summary, _ = create_session("--prompt", "x", "--agent-command", "true", "--inline")
    assert summary["state"] == "failed"
    assert "widgets has no ready snapshot" in summary["error"]
    assert "inspect snapshot refresh widgets" in summary["error"]
