"""Child sessions in the Session table: the storage side of `sessions.agents.children`'s
rules. A child is started through `services.session_create`, as the prompt's author (so only
on a repository that person may start sessions on, invariant 6), with its parent's agent.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

from accounts import access
from sessions import services
from sessions.agents.base import AgentError
from sessions.agents.children import ChildPolicy
from sessions.models import Event, Session, State


class SessionChildren(ChildPolicy):
    """Children of `parent`, started as `user` with the parent's agent."""

    def __init__(self, parent, *, user, max_depth: int, max_per_repository: int) -> None:
        super().__init__(max_depth=max_depth, max_per_repository=max_per_repository)
        self.parent = parent
        self.user = user

    def depth(self) -> int:
        depth, parent_id = 0, self.parent.parent_id
        while parent_id is not None and depth <= self.max_depth:
            depth += 1
            parent_id = Session.objects.filter(pk=parent_id).values_list("parent_id", flat=True)
            parent_id = parent_id.first()
        return depth

    def live_children(self, repository: str) -> int:
        done = {*services.NO_MORE_PROMPTS, State.IDLE, State.FAILED, State.PR_OPEN}
        return (
            Session.objects.filter(parent=self.parent, repository__name=repository)
            .exclude(state__in=done)
            .count()
        )

    def create_child(self, repository: str, prompt: str) -> dict[str, Any]:
        repo = access.repositories_for(self.user).filter(name=repository).first()
        if repo is None:
            raise AgentError(f"no repository named {repository!r} that {self.user} can use")
        try:
            child = services.session_create(
                repository=repo,
                creator=self.user,
                prompt=prompt,
                agent=self.parent.agent,
                agent_command=self.parent.agent_command,
                parent=self.parent,
            )
        except (services.SessionError, PermissionDenied) as exc:
            raise AgentError(f"cannot start a session on {repository}: {exc}") from None
        return {"id": child.pk, "repository": repository, "state": child.state}

    def child_status(self, session_id: int) -> dict[str, Any] | None:
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
