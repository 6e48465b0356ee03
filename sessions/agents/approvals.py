"""The approval gate as the agent's tools see it: a command the repository's policy marks
irreversible (`irreversible_commands`) becomes a request, and the turn waits for a decision.
The agent's side of the controls (approvals.gate, approvals.secrets), so it lives with the
agents it serves."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from approvals import gate
from approvals.models import ApprovalRequest
from approvals.policy import policy_for
from approvals.policy_rules import IRREVERSIBLE_COMMAND
from approvals.secrets import SecretsUnavailable, secret_env
from sessions.agents.base import AgentError, ApprovalGate


class SessionApprovals(ApprovalGate):
    """Requests made by the agent of `session` during the turn of `prompt`."""

    def __init__(self, session, prompt, *, wait_seconds: float | None = None) -> None:
        self.session = session
        self.prompt = prompt
        self.policy = policy_for(session.repository)
        self.wait_seconds = wait_seconds if wait_seconds is not None else self.policy.wait_seconds
        self._count = 0

    def needs_approval(self, command: str) -> bool:
        return self.policy.is_irreversible(command)

    def wait_for_approval(
        self, command: str, stopped: threading.Event
    ) -> tuple[bool, str, ApprovalRequest]:
        self._count += 1
        digest = hashlib.sha256(command.encode()).hexdigest()[:16]
        # The same in a resumed turn, so a retried turn finds its request instead of a new one.
        key = f"session:{self.session.pk}:prompt:{self.prompt.pk}:command:{self._count}:{digest}"
        approval = gate.request_approval(
            action=IRREVERSIBLE_COMMAND,
            payload={"command": command, "turn": self.prompt.order},
            session=self.session,
            requested_by=None,
            prompt_author=self.prompt.author,
            idempotency_key=key,
        )
        approval = gate.wait_for_decision(approval, timeout=self.wait_seconds, stopped=stopped)
        state = approval.state
        if state == ApprovalRequest.State.APPROVED:
            who = approval.decided_by.get_username() if approval.decided_by else "a reviewer"
            return True, f"approved by {who}", approval
        if state == ApprovalRequest.State.REJECTED:
            why = f": {approval.reason}" if approval.reason else ""
            return False, f"a reviewer rejected it{why}", approval
        if state == ApprovalRequest.State.EXPIRED:
            return False, f"no reviewer decided in time (approval {approval.pk} expired)", approval
        if state in (ApprovalRequest.State.EXECUTED, ApprovalRequest.State.FAILED):
            return False, f"it already ran in an earlier attempt of this turn ({state})", approval
        return False, f"approval {approval.pk} is still {state}", approval

    def record(self, handle: Any, *, ok: bool, result: dict[str, Any]) -> None:
        gate.record_execution(handle, ok=ok, result=result)


def agent_env(session) -> dict[str, str]:
    """The repository secrets marked for the agent, as its commands' environment; AgentError
    (shown on the session) when they exist but cannot be decrypted."""
    try:
        return secret_env(session.repository, scope="agent")
    except SecretsUnavailable as exc:
        raise AgentError(str(exc)) from None
