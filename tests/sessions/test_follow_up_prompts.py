import pytest

from sessions.models import Event, Prompt, Session
from snapshots.backends import sandbox_backend

pytestmark = pytest.mark.django_db

APPEND = 'echo "$INSPECT_AUTHOR: $INSPECT_PROMPT" >> notes.txt; cat notes.txt'


def test_prompts_from_two_people_run_in_order_each_attributed(
    ready_repo, create_session, inspect_cli, team
):
    code, first, _ = create_session(
        "--prompt", "first", "--agent-command", APPEND, "--as", "engineer"
    )
    assert code == 0
    session_id = first["id"]
    inspect_cli("session", "prompt", str(session_id), "second", "--as", "admin")
    inspect_cli("session", "prompt", str(session_id), "third", "--as", "engineer", "--inline")
    session = Session.objects.get(pk=session_id)
    assert session.state == "idle"
    prompts = list(
        session.prompts.order_by("order").values_list("text", "author__username", "state")
    )
    assert prompts == [
        ("first", "engineer", "done"),
        ("second", "admin", "done"),
        ("third", "engineer", "done"),
    ]
    last_output = list(
        Event.objects.filter(session=session, kind="output").values_list("payload__text", flat=True)
    )[-3:]
    assert last_output == ["engineer: first", "admin: second", "engineer: third"]
    commits = Prompt.objects.filter(session=session).values_list("commit", flat=True)
    assert len(set(commits)) == 3


def test_a_follow_up_after_the_sandbox_is_gone_resumes_exactly_where_it_stopped(
    ready_repo, create_session, inspect_cli
):
    _, first, _ = create_session("--prompt", "first", "--agent-command", APPEND, "--inline")
    session = Session.objects.get(pk=first["id"])
    sandbox_backend().attach(session.sandbox_id).terminate()  # e.g. reaped when idle
    inspect_cli("session", "prompt", str(session.pk), "second", "--inline")
    outputs = list(
        Event.objects.filter(session=session, kind="output").values_list("payload__text", flat=True)
    )
    assert outputs[-2:] == ["admin: first", "admin: second"]
    session.refresh_from_db()
    assert session.timings["restore_ms"] > 0  # restored from the session's own snapshot


def test_a_follow_up_reuses_the_live_sandbox(ready_repo, create_session, inspect_cli):
    _, first, _ = create_session("--prompt", "first", "--agent-command", APPEND, "--inline")
    session = Session.objects.get(pk=first["id"])
    sandbox_id = session.sandbox_id
    inspect_cli("session", "prompt", str(session.pk), "second", "--inline")
    session.refresh_from_db()
    assert session.sandbox_id == sandbox_id
    assert session.timings["restore_ms"] == 0.0  # nothing restored: the same sandbox went on
    outputs = list(
        Event.objects.filter(session=session, kind="output").values_list("payload__text", flat=True)
    )
    assert outputs[-2:] == ["admin: first", "admin: second"]
