"""The recipe's commands in a session's sandbox: `verify` after each turn (a command the
approval policy marks irreversible waits for a reviewer first) and `start` while a sandbox is
restored. Each is recorded as a `command` event, and so in the audit log."""

from __future__ import annotations

import threading
import time

from inspect_web.text import cut
from sessions import services
from sessions.agents.approvals import SessionApprovals
from sessions.events import append_event
from sessions.models import Prompt, Session
from snapshots.sandbox import ExecResult, Sandbox

OUTPUT_HEAD = OUTPUT_TAIL = 4000
VERIFY_TIMEOUT_SECONDS = 900


def head_tail(text: str) -> dict:
    """A command's output as its event keeps it: the head and the tail of a long one."""
    part = cut(text, OUTPUT_HEAD, OUTPUT_TAIL)
    return {"output_head": part.head, "output_tail": part.tail}


def record_command(
    session_id: int, turn: int, phase: str, command: str, result: ExecResult
) -> None:
    """A recipe command that ran (`start`, `verify`) in the session's log."""
    text = "".join(f"{line.text}\n" for line in result.output)
    append_event(
        session_id,
        "command",
        {
            "command": command,
            "phase": phase,
            "exit_code": result.exit_code,
            "ok": result.ok,
            "duration_ms": round(result.duration_s * 1000, 1),
            "limit_hit": result.limit_hit,
            "turn": turn,
            **head_tail(text),
        },
    )


class StopRequested:
    """The `stopped` flag a wait for a decision polls: Stop pressed or the driver's lease lost."""

    def __init__(self, session_id: int, lease_lost: threading.Event) -> None:
        self.session_id = session_id
        self.lease_lost = lease_lost

    def is_set(self) -> bool:
        return bool(services.stop_requested(self.session_id)) or self.lease_lost.is_set()

    def wait(self, seconds: float) -> bool:
        time.sleep(seconds)
        return self.is_set()


def verify(
    session: Session,
    prompt: Prompt,
    sandbox: Sandbox,
    commands: tuple[str, ...],
    stopped: StopRequested,
) -> bool | None:
    """Run the recipe's verify `commands` in order; whether all passed (None: there were none).
    A command a reviewer refused is recorded as not run, and counts as failed."""
    approvals = SessionApprovals(session, prompt)
    verify_ok: bool | None = None
    for command in commands:
        handle = None
        if approvals.needs_approval(command):
            # A recipe command the policy marks irreversible waits for a reviewer too.
            allowed, why, handle = approvals.wait_for_approval(command, stopped)
            if not allowed:
                verify_ok = False
                append_event(
                    session.pk,
                    "command",
                    {"command": command, "phase": "verify", "exit_code": None, "ok": False,
                     "duration_ms": 0, "output_head": f"not run: {why}", "turn": prompt.order},
                )  # fmt: skip
                continue
        result = sandbox.run(command, cwd="/workspace", timeout=VERIFY_TIMEOUT_SECONDS)
        if handle is not None:
            approvals.record(handle, ok=result.ok, result={"exit_code": result.exit_code})
        verify_ok = result.ok if verify_ok is None else verify_ok and result.ok
        record_command(session.pk, prompt.order, "verify", command, result)
    return verify_ok
