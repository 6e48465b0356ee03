import pytest

from sessions import services
from sessions.models import Event, Session
from sessions.states import TRANSITIONS, IllegalTransition, check_transition

pytestmark = pytest.mark.django_db


def test_the_happy_path_is_legal():
    path = ["queued", "provisioning", "syncing", "running", "verifying", "idle", "pr_open"]
    steps = [*zip(path, path[1:], strict=False), ("pr_open", "merged"), ("pr_open", "closed")]
    for current, target in steps:
        check_transition(current, target)  # raises if the table refused it
        assert target in TRANSITIONS[current]


@pytest.mark.parametrize(
    ("current", "target"),
    [("queued", "running"), ("idle", "merged"), ("merged", "provisioning"), ("cancelled", "idle")],
)
def test_an_illegal_transition_raises(current, target):
    with pytest.raises(IllegalTransition, match=f"cannot go from {current} to {target}"):
        check_transition(current, target)


def test_failed_and_cancelled_are_reachable_from_every_working_state():
    for state in ["queued", "provisioning", "syncing", "running", "verifying", "idle", "pr_open"]:
        assert {"failed", "cancelled"} <= TRANSITIONS[state]


def test_every_transition_is_an_event_and_a_refused_one_changes_nothing(team):
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="t", branch="main"
    )
    services.session_transition(session, "provisioning")
    services.session_transition(session, "failed", reason="the snapshot is gone")
    with pytest.raises(IllegalTransition):
        services.session_transition(session, "merged")
    session.refresh_from_db()
    assert session.state == "failed"
    payloads = list(Event.objects.filter(session=session).values_list("payload", flat=True))
    assert payloads == [
        {"from": "queued", "to": "provisioning"},
        {"from": "provisioning", "to": "failed", "reason": "the snapshot is gone"},
    ]


def test_a_stale_driver_cannot_move_the_session(team):
    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="t", branch="main", driver_fence=7
    )
    with pytest.raises(IllegalTransition):
        services.session_transition(session, "provisioning", fence=6)
    session.refresh_from_db()
    assert session.state == "queued"
