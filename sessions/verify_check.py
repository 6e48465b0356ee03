"""Each turn's verification published as the `Inspect / verify` check run on the pull request's
head commit, so a repository can require it and a reviewer can read it on the code host: which
commands ran, their exit codes, durations and output tails, the screenshots taken and the
snapshot the sandbox was restored from. Published by sessions/pulls.py after each push; the code
host decides how (GitHubHost.publish_check; a local repository has no checks)."""

from __future__ import annotations

from django.conf import settings

from inspect_web.text import cut
from sessions.codehosts import CheckReport, CodeHostError, code_host_for
from sessions.events import append_event
from sessions.models import Event, Prompt, PullRequest, Session

VERIFY_CHECK = "Inspect / verify"
TAIL_CHARS = 1_500  # of each command's output, in the check's text
TEXT_LIMIT = 60_000  # GitHub keeps at most 65,535 characters of a check's summary and text


def _seconds(ms) -> str:
    return f"{(ms or 0) / 1000:.1f} s"


def newest_turn(session: Session) -> int:
    """The order of the session's newest finished turn (0: none)."""
    return (
        Prompt.objects.filter(session=session, state=Prompt.State.DONE)
        .order_by("-order")
        .values_list("order", flat=True)
        .first()
    ) or 0


def verification_report(
    session: Session, *, head: str, turn: int, by_hand: bool = False
) -> CheckReport:
    """Turn `turn`'s verification as a check run on `head`: success when every verify command
    passed, failure when one did not, neutral when none ran or when `head` holds hand edits
    made in the terminal since (`by_hand`: no turn verified them)."""
    events = Event.objects.filter(session=session)
    commands = [
        e.payload
        for e in events.filter(kind="command", payload__phase="verify", payload__turn=turn)
        .order_by("seq")
    ]  # fmt: skip
    shots = events.filter(kind="screenshot", payload__turn=turn).count()
    page = f"{settings.PUBLIC_URL}{session.get_absolute_url()}"
    if by_hand:
        conclusion, verdict = "neutral", "Not verified"
        why = f"changed by hand in the terminal after turn {turn}; the next turn verifies it"
    elif not commands:
        conclusion, verdict = "neutral", "No verification ran"
        why = "the recipe has no `verify` commands, or the turn was stopped before them"
    elif all(c.get("ok") for c in commands):
        conclusion, verdict, why = "success", "Verification passed", ""
    else:
        conclusion, verdict, why = "failure", "Verification failed", ""
    failed = sum(1 for c in commands if not c.get("ok"))
    title = (
        f"{verdict}: {len(commands) - failed} of {len(commands)} commands passed"
        if commands
        else verdict
    )
    lines = [f"**{verdict}** after turn {turn} of [session {session.pk}]({page}) on "
             f"`{head[:12]}`." + (f" ({why})" if why else ""), ""]  # fmt: skip
    if commands:
        lines += ["| | Command | Exit code | Duration |", "|---|---|---|---|"]
        for c in commands:
            mark = "✅" if c.get("ok") else "❌"
            code = "not run" if c.get("exit_code") is None else c.get("exit_code")
            command = str(c.get("command", "")).replace("|", "\\|").replace("`", "'")
            lines.append(f"| {mark} | `{command}` | {code} | {_seconds(c.get('duration_ms'))} |")
        lines.append("")
    snapshot = session.snapshot
    if snapshot is not None:
        lines.append(
            f"Ran on snapshot {snapshot.pk} of {session.repository.name} at "
            f"`{snapshot.commit[:12]}` (built {snapshot.created_at:%Y-%m-%d %H:%M} UTC), "
            "brought up to the branch's newest commits before the agent ran."
        )
    lines.append(f"Screenshots: {shots}" + (f" ([on the session page]({page}))." if shots else "."))
    text = []
    for c in commands:
        output = (c.get("output_tail") or c.get("output_head") or "").rstrip()
        kept = cut(output, 0, TAIL_CHARS)
        head_note = f"… {kept.omitted:,} characters before\n" if kept.omitted else ""
        code = "not run" if c.get("exit_code") is None else f"exit {c.get('exit_code')}"
        text.append(
            f"### `{c.get('command')}` — {code}, {_seconds(c.get('duration_ms'))}\n\n"
            f"```\n{head_note}{kept.tail or kept.head or '(no output)'}\n```\n"
        )
    return CheckReport(
        name=VERIFY_CHECK,
        head=head,
        conclusion=conclusion,
        title=title[:200],
        summary="\n".join(lines)[:TEXT_LIMIT],
        text="\n".join(text)[:TEXT_LIMIT],
        details_url=page,
        external_id=f"inspect-session-{session.pk}",
    )


def publish_verification(
    session: Session, pr: PullRequest, *, head: str, by_hand: bool = False
) -> None:
    """Publish the newest turn's verification on `head` of `pr` (created once, then updated);
    a refusal is an `error` event on the session, never a failed turn."""
    host = code_host_for(session.repository)
    turn = newest_turn(session)
    report = verification_report(session, head=head, turn=turn, by_hand=by_hand)
    try:
        published = host.publish_check(pr, report)
    except CodeHostError as exc:
        append_event(session.pk, "error", {"phase": "publish", "message": str(exc)})
        return
    if published is None:
        return
    append_event(
        session.pk,
        "check_published",
        {"pull_request": pr.pk, "name": report.name, "head": head,
         "conclusion": report.conclusion, "url": published.url,
         "turn": turn},
    )  # fmt: skip
