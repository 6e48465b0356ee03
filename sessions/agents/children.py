"""Child sessions: the built-in agent fans a large task out into parallel sessions.

`ChildPolicy` holds the rules (a depth limit, a cap of live children per repository) over a few
storage questions; `SessionChildren` answers them with the Session table and starts children
through `sessions.services.session_create`, as the prompt's author — so a child can only be
started on a repository that person may start sessions on (invariant 6).
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


class SessionChildren(ChildPolicy):
    """Children of `parent`, started as `user` with the parent's agent."""

    def __init__(self, parent, *, user, max_depth: int, max_per_repository: int) -> None:
        super().__init__(max_depth=max_depth, max_per_repository=max_per_repository)
        self.parent = parent
        self.user = user

    def depth(self) -> int:
        from sessions.models import Session

        depth, parent_id = 0, self.parent.parent_id
        while parent_id is not None and depth <= self.max_depth:
            depth += 1
            parent_id = Session.objects.filter(pk=parent_id).values_list("parent_id", flat=True)
            parent_id = parent_id.first()
        return depth

    def live_children(self, repository: str) -> int:
        from sessions import services
        from sessions.models import Session, State

        done = {*services.NO_MORE_PROMPTS, State.IDLE, State.FAILED, State.PR_OPEN}
        return (
            Session.objects.filter(parent=self.parent, repository__name=repository)
            .exclude(state__in=done)
            .count()
        )

    def create_child(self, repository: str, prompt: str) -> dict[str, Any]:
        from django.core.exceptions import PermissionDenied
        from django.db import transaction

        from accounts import access
        from sessions import services
        from sessions.models import Session

        repo = access.repositories_for(self.user).filter(name=repository).first()
        if repo is None:
            raise AgentError(f"no repository named {repository!r} that {self.user} can use")
        try:
            with transaction.atomic():
                child = services.session_create(
                    repository=repo,
                    creator=self.user,
                    prompt=prompt,
                    agent=self.parent.agent,
                    agent_command=self.parent.agent_command,
                )
                Session.objects.filter(pk=child.pk).update(parent=self.parent)
        except (services.SessionError, PermissionDenied) as exc:
            raise AgentError(f"cannot start a session on {repository}: {exc}") from None
        return {"id": child.pk, "repository": repository, "state": child.state}

    def child_status(self, session_id: int) -> dict[str, Any] | None:
        from sessions.models import Event, Session

        child = Session.objects.filter(pk=session_id, parent=self.parent).first()
        if child is None:
            return None
        last = (
            Event.objects.filter(session=child, kind="agent_message")
            .order_by("-seq")
            .values_list("payload", flat=True)
            .first()
        )
        return {
            "id": child.pk,
            "state": child.state,
            "diff": child.diff_stats or {},
            "error": child.error,
            "last_message": (last or {}).get("text", "")[:2000],
        }
