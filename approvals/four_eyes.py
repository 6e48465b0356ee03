"""Four eyes: who may not decide an approval request because they had a hand in it.

The one rule (approvals.gate.approval_decide enforces it; the Approvals page, the API and the
CLI all decide through it). A person may not decide a request when they

- asked for it (`requested_by`),
- wrote any prompt of its session, the first or a follow-up (or are its `prompt_author`),
- typed in its session's terminal (audited as `terminal.input`), or
- authored or co-authored a commit of its session (the `author` / `by_hand` of its diff events:
  the prompt authors' turns and the typists' hand edits), or
- wrote or committed the repository's recipe change that asks for it (a build's `widen_egress`
  request carries those commits' addresses as `recipe_authors`; matched against the user's
  verified addresses only).

Everything is read from rows that outlive the session's sandbox (prompts, the audit log, the
event log), so the rule holds after the sandbox is gone.
"""

from __future__ import annotations

from collections.abc import Iterable

from allauth.account.models import EmailAddress
from django.apps import apps
from django.db.models import Min, Q

from accounts.identity import verified_email
from approvals.models import ApprovalRequest, AuditEntry

ASKED = "You asked for this action; another reviewer has to decide it."


def _contributed(how: str) -> str:
    return f"You contributed to this change ({how}); a reviewer who did not has to decide it."


def _names(by_hand: str | None) -> set[str]:
    return {name.strip() for name in (by_hand or "").split(",") if name.strip()}


def _session_contributions(user, session_ids: set[int]) -> dict[int, str]:
    """Per session, the first way `user` contributed to it (prompt, terminal, commit)."""
    # By name: sessions sits above the controls, which never import it ("agent_sessions" is
    # the sessions app's label). Looked up per call, once the app registry is ready.
    Prompt = apps.get_model("agent_sessions", "Prompt")
    Event = apps.get_model("agent_sessions", "Event")
    found: dict[int, str] = {}
    prompts = (
        Prompt.objects.filter(session_id__in=session_ids, author_id=user.pk)
        .values("session_id")
        .annotate(first=Min("order"))
        .values_list("session_id", "first")
    )
    for session_id, order in prompts:
        found[session_id] = f"prompt #{order}"
    typed = AuditEntry.objects.filter(
        action="terminal.input", actor_id=user.pk, session_id__in=session_ids
    ).values_list("session_id", flat=True)
    for session_id in set(typed):
        found.setdefault(session_id, "typed in its terminal")
    name = user.get_username()
    commits = Event.objects.filter(session_id__in=session_ids, kind="diff").filter(
        Q(payload__author=name) | Q(payload__by_hand__icontains=name)
    )
    for session_id, author, by_hand in commits.values_list(
        "session_id", "payload__author", "payload__by_hand"
    ).distinct():
        # icontains is a prefilter (bob in "bobby"); the names are compared exactly here.
        if author == name or name in _names(by_hand):
            found.setdefault(session_id, "authored one of its commits")
    return found


def _verified_addresses(user) -> set[str]:
    addresses = {
        email.lower()
        for email in EmailAddress.objects.filter(user=user, verified=True).values_list(
            "email", flat=True
        )
    }
    primary = verified_email(user)
    return addresses | ({primary.lower()} if primary else set())


def contributions(user, approvals: Iterable[ApprovalRequest]) -> dict[int, str]:
    """Why `user` may not decide each of `approvals`, by approval id; an approval `user` had
    no hand in is absent. A few queries for any number of approvals (the inbox lists many)."""
    approvals = list(approvals)
    session_ids = {a.session_id for a in approvals if a.session_id is not None}
    by_session = _session_contributions(user, session_ids) if session_ids else {}
    recipe_authors = [a for a in approvals if (a.payload or {}).get("recipe_authors")]
    addresses = _verified_addresses(user) if recipe_authors else set()
    refused: dict[int, str] = {}
    for approval in approvals:
        if approval.requested_by_id == user.pk:
            refused[approval.pk] = ASKED
        elif approval.session_id in by_session:
            refused[approval.pk] = _contributed(by_session[approval.session_id])
        elif approval.prompt_author_id == user.pk:
            refused[approval.pk] = _contributed("the prompt that led to it")
        elif addresses & set((approval.payload or {}).get("recipe_authors", [])):
            refused[approval.pk] = _contributed("committed the recipe change that asks for it")
    return refused


def decider_conflict(user, approval: ApprovalRequest) -> str | None:
    """Why `user` may not decide `approval` (they contributed to it), or None."""
    return contributions(user, [approval]).get(approval.pk)
