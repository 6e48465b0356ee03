"""A session's approval requests in its event log: each change the gate announces
(approvals.gate.approval_changed: made, decided, expired, carried out) is appended as an
`approval` event in the same transaction, so every viewer's approvals panel updates."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from approvals.gate import approval_changed
from approvals.models import ApprovalRequest
from sessions.events import append_event


@receiver(approval_changed, dispatch_uid="sessions.approval_events")
def append_approval_event(
    sender, *, approval: ApprovalRequest, payload: dict[str, Any], **kwargs: Any
) -> None:
    append_event(approval.session_id, "approval", payload)
