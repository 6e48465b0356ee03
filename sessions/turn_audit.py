"""What a turn leaves in the audit log beyond its commands: the file changes it made, and the
agent's own process (audited like any sandbox command)."""

from __future__ import annotations

import time

from approvals import audit
from sessions.agents.base import AgentEvent
from sessions.models import Prompt, Session
from sessions.workspace_git import GIT, diff_against
from snapshots.sandbox import Sandbox, SandboxError


def record_changes(
    session: Session,
    prompt: Prompt,
    *,
    commit: str,
    changes: dict | None,
    sandbox: Sandbox | None,
    ended: str,
    stopped_by: str = "",
) -> None:
    """The turn's file-change summary: what the session's tree differs by from its base, with
    the turn's commit and prompt author. `changes`: what the turn committed; None when its work
    was not committed (a failed turn), which is then read from `sandbox` as it was left."""
    if changes is None:
        changes = uncommitted_changes(sandbox, session.base_commit)
    audit.record(
        "session.changes",
        actor_kind=audit.AuditEntry.ActorKind.AGENT,
        session=session,
        object_type="session",
        object_id=session.pk,
        data={
            "turn": prompt.order,
            "commit": commit,
            "prompt_author": prompt.author.get_username(),
            "ended": ended,
            "stopped_by": stopped_by,
            **changes,
        },
    )


def uncommitted_changes(sandbox: Sandbox | None, base: str) -> dict:
    """The workspace's changes from `base`, untracked files included; best effort."""
    try:
        if sandbox is None or not base:
            raise SandboxError("no sandbox was left to read")
        files = diff_against(sandbox, base)
        untracked = sandbox.run(
            f"{GIT} ls-files --others --exclude-standard", cwd="/workspace", timeout=60
        )
    except Exception as exc:  # best effort: the turn has already failed
        return {"files": None, "unknown": f"the changes could not be read: {exc}"}
    paths = [f.path for f in files] + untracked.stdout.splitlines()
    return {
        "files": len(paths),
        "added": sum(f.added for f in files),
        "removed": sum(f.removed for f in files),
        "paths": paths[:200],
        "committed": False,
    }


def record_agent_process(
    session: Session, prompt: Prompt, command: str, done: AgentEvent, started: float
) -> None:
    """The agent's own process, audited like any sandbox command (its output is already in the
    session's log, line by line). `done`: the runtime's closing event; `started`: monotonic."""
    exit_code = done.data.get("exit_code")
    audit.record(
        "sandbox.command",
        session=session,
        object_type="session",
        object_id=session.pk,
        data={
            "command": command,
            "phase": "agent",
            "exit_code": exit_code,
            "ok": exit_code == 0 and not done.data.get("stopped"),
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
            "stopped": bool(done.data.get("stopped")),
            "turn": prompt.order,
        },
    )
