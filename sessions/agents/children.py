"""Child sessions: the built-in agent fans a large task out into parallel sessions.

`ChildPolicy` holds the rules (a depth limit, a cap of live children per repository) over a few
storage questions; `sessions.children.SessionChildren` answers them with the Session table.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from sessions.agents.base import AgentError, ChildSessions


class ChildPolicy(ChildSessions):
    """The limits on spawning, whatever stores the sessions."""

    def __init__(self, *, max_depth: int, max_per_repository: int) -> None:
        self.max_depth = max_depth
        self.max_per_repository = max_per_repository

    # Storage questions ------------------------------------------------------------------
    @abstractmethod
    def depth(self) -> int:
        """How many ancestors the spawning session has (a top-level session: 0)."""

    @abstractmethod
    def live_children(self, repository: str) -> int:
        """The spawning session's children on `repository` that are still working."""

    @abstractmethod
    def create_child(self, repository: str, prompt: str) -> dict[str, Any]: ...

    @abstractmethod
    def child_status(self, session_id: int) -> dict[str, Any] | None:
        """A child's state, or None if `session_id` is not a child of this session."""

    # The tools' entry points --------------------------------------------------------------
    def spawn(self, repository: str, prompt: str) -> dict[str, Any]:
        if not prompt.strip():
            raise AgentError("spawn_session needs a prompt that says what the session should do")
        if self.depth() + 1 > self.max_depth:
            raise AgentError(
                f"this session is already {self.depth()} level(s) below a top-level session; "
                f"child sessions may nest at most {self.max_depth} deep — do the work here"
            )
        live = self.live_children(repository)
        if live >= self.max_per_repository:
            raise AgentError(
                f"this session already has {live} child sessions working on {repository} "
                f"(the cap is {self.max_per_repository}); wait for one with session_status"
            )
        return self.create_child(repository, prompt)

    def status(self, session_id: int) -> dict[str, Any]:
        found = self.child_status(session_id)
        if found is None:
            raise AgentError(f"session {session_id} is not a session this one started")
        return found
