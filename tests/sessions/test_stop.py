import time

import pytest

from sessions import services
from sessions.models import Event, Session
from snapshots.backends import sandbox_backend

pytestmark = pytest.mark.django_db(transaction=True)

LONG_AGENT = "echo partial > partial.txt; echo started; sleep 60; echo finished > late.txt"


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def processes(sandbox) -> str:
    """The command lines of every process in the sandbox."""
    listing = sandbox.run(
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
    )
    return listing.stdout


def test_stop_ends_the_turn_keeps_partial_work_and_goes_idle(ready_repo, team, start_celery):
    start_celery("worker")
    session = services.session_create(
        repository=ready_repo, creator=team.engineer, prompt="long job", agent_command=LONG_AGENT
    )
    wait_for(
        lambda: Event.objects.filter(
            session=session, kind="output", payload__text="started"
        ).exists(),
        what="the agent to start",
    )
    session.refresh_from_db()
    sandbox = sandbox_backend().attach(session.sandbox_id)
    assert "sleep 60" in processes(sandbox)
    asked = time.monotonic()
    assert services.session_stop(session=session, user=team.admin)
    wait_for(lambda: "sleep 60" not in processes(sandbox), timeout=10, what="the agent to go")
    gone_after = time.monotonic() - asked
    assert gone_after < 2, f"the agent's processes took {gone_after:.1f} s to go"
    wait_for(lambda: Session.objects.get(pk=session.pk).state == "idle", what="idle")
    stopped_after = time.monotonic() - asked
    session.refresh_from_db()
    assert stopped_after < 5, f"the turn took {stopped_after:.1f} s to stop"
    paths = session.diff_stats["paths"]
    assert "partial.txt" in paths and "late.txt" not in paths

    # The state is committed a moment before its event is appended: wait for the event too.
    def last_status():
        return Event.objects.filter(session=session, kind="state").order_by("-seq").first()

    wait_for(lambda: last_status().payload.get("to") == "idle", timeout=10, what="the event")
    assert last_status().payload == {"from": "running", "to": "idle", "reason": "stopped by admin"}
    # The agent's processes are still gone from the sandbox it rests in.
    sandbox = sandbox_backend().attach(session.sandbox_id)
    assert "sleep 60" not in processes(sandbox)


def test_stop_is_refused_for_a_role_without_it_and_when_nothing_runs(ready_repo, team):
    from django.core.exceptions import PermissionDenied

    session = Session.objects.create(
        repository=ready_repo, creator=team.engineer, title="t", branch="main", state="idle"
    )
    with pytest.raises(PermissionDenied):
        services.session_stop(session=session, user=team.reviewer)
    assert services.session_stop(session=session, user=team.engineer) is False
