"""The session state machine: the one table of legal transitions."""

from __future__ import annotations

from sessions.models import State

ACTIVE = {State.PROVISIONING, State.SYNCING, State.RUNNING, State.VERIFYING}

TRANSITIONS: dict[str, set[str]] = {
    State.QUEUED: {State.PROVISIONING, State.FAILED, State.CANCELLED},
    # A turn ends idle, or back at pr_open when its session has a pull request open.
    State.PROVISIONING: {
        State.SYNCING,
        State.RUNNING,
        State.IDLE,
        State.PR_OPEN,
        State.FAILED,
        State.CANCELLED,
    },
    # Back to provisioning from a busy state only when a new driver resumes a lost turn.
    State.SYNCING: {State.RUNNING, State.IDLE, State.PROVISIONING, State.FAILED, State.CANCELLED},
    State.RUNNING: {
        State.VERIFYING,
        State.IDLE,
        State.PR_OPEN,
        State.PROVISIONING,
        State.FAILED,
        State.CANCELLED,
    },
    State.VERIFYING: {State.IDLE, State.PR_OPEN, State.PROVISIONING, State.FAILED, State.CANCELLED},
    # A follow-up prompt starts the next turn from idle (or with a PR open).
    State.IDLE: {State.PROVISIONING, State.PR_OPEN, State.FAILED, State.CANCELLED},
    State.PR_OPEN: {State.PROVISIONING, State.MERGED, State.CLOSED, State.FAILED, State.CANCELLED},
    State.MERGED: set(),
    State.CLOSED: {State.PR_OPEN},  # a reopened pull request
    State.FAILED: {State.PROVISIONING},  # a new prompt retries a failed session
    State.CANCELLED: set(),
}


class IllegalTransition(Exception):
    def __init__(self, current: str, target: str) -> None:
        self.current, self.target = current, target
        super().__init__(f"a session cannot go from {current} to {target}")


def check_transition(current: str, target: str) -> None:
    """Raise IllegalTransition unless `current → target` is in the table."""
    if target not in TRANSITIONS.get(current, set()):
        raise IllegalTransition(current, target)
