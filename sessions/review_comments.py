"""Review comments feed back: a submitted review that asks for changes — line comments, or
"changes requested" — becomes ONE follow-up prompt holding each comment with its file, line and
the code it is on, attributed to the reviewer. After the turn that answers it, the agent's
answer is posted as a reply to each comment (on the code host; on the page for the dashboard's
own review) and each comment records the commit that resolved it.

Both sources go through `review_feedback_queue`: GitHub's webhook (integrations/github) and the
dashboard's review of a local repository's session (`dashboard_comment_add`,
`dashboard_review_submit`). A review is queued once per key (the host's review id), so a
redelivered webhook queues nothing new.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import access, roles
from inspect_web.text import shorten
from sessions.codehosts import CodeHostError, LocalHost, code_host_for
from sessions.events import append_event
from sessions.models import (
    Event,
    Prompt,
    PullRequest,
    ReviewComment,
    ReviewEvent,
    ReviewFeedback,
    Session,
)
from sessions.pulls import record_review
from sessions.services import SessionError, prompt_queue

log = logging.getLogger(__name__)

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
QUOTED_LINES = 4  # the commented line and the few before it, as GitHub's diff_hunk ends
MAX_COMMENT_BYTES = 20_000
MAX_REPLY_CHARS = 4_000
ASKS_FOR_CHANGES = "changes_requested"
STATE_WORDS = {
    "changes_requested": "requested changes",
    "commented": "commented",
    "approved": "approved with comments",
}


@dataclass(frozen=True)
class LineComment:
    """A review comment as a source hands it over. `line` None: on the file, with `note`."""

    path: str
    line: int | None
    body: str
    side: str = "RIGHT"
    quoted: str = ""
    note: str = ""
    external_id: str | None = None
    url: str = ""


def asks_for_changes(state: str, comments: list[LineComment]) -> bool:
    """Whether a submitted review is one the agent should answer."""
    return bool(comments) or state == ASKS_FOR_CHANGES


# -- the code a comment is on ------------------------------------------------------------------
def quote_from_hunk(diff_hunk: str) -> str:
    """GitHub's `diff_hunk` ends at the commented line: its last few lines, without the `@@`."""
    lines = [ln for ln in (diff_hunk or "").splitlines() if not ln.startswith("@@")]
    return "\n".join(lines[-QUOTED_LINES:])


def quote_from_patch(patch: str, line: int) -> str | None:
    """The lines of a unified `patch` ending at new-side line `line` (as GitHub quotes a
    comment), or None when the patch does not show that line."""
    shown: list[str] = []
    number = None
    for text in (patch or "").splitlines():
        match = HUNK.match(text)
        if match:
            number, shown = int(match.group(1)), []
            continue
        if number is None:  # the file header, before the first hunk
            continue
        if text.startswith("-"):
            shown.append(text)
            continue
        if text.startswith("\\"):  # "\ No newline at end of file"
            continue
        shown.append(text)
        if number == line:
            return "\n".join(shown[-QUOTED_LINES:])
        number += 1
    return None


def _file_patches(session: Session) -> dict[str, str]:
    """Each file of the session's newest change (its last diff events), path → patch."""
    diffs = Event.objects.filter(session=session, kind="diff")
    newest = diffs.order_by("-seq").values_list("payload__turn", flat=True).first()
    if newest is None:
        return {}
    files = diffs.filter(payload__turn=newest).order_by("seq").values_list("payload", flat=True)
    return {p.get("path", ""): p.get("patch", "") for p in files}


# -- queueing one prompt per review -----------------------------------------------------------
def prompt_text(
    *, login: str, state: str, body: str, comments: list[LineComment], where: str, url: str = ""
) -> str:
    """The follow-up prompt a review becomes: what the reviewer said, then each comment with
    its file, line and quoted code."""
    said = STATE_WORDS.get(state, state or "reviewed")
    lines = [f"@{login} {said} in a review{where}."]
    if body.strip():
        lines += ["", body.strip()]
    if comments:
        lines += ["", "Review comments (address each one; your answer is posted as a reply):"]
        for number, c in enumerate(comments, 1):
            place = f"`{c.path}` line {c.line}" if c.line else f"`{c.path}`"
            if c.note:
                place += f" ({c.note})"
            lines += ["", f"{number}. {place}:"]
            if c.quoted:
                lines += ["   ```diff", *(f"   {q}" for q in c.quoted.splitlines()), "   ```"]
            lines += [f"   {text}" for text in c.body.strip().splitlines()]
    if url:
        lines += ["", f"(the review: {url})"]
    return "\n".join(lines)


def review_feedback_queue(
    *,
    session: Session,
    key: str,
    source: str,
    reviewer,
    login: str,
    state: str,
    body: str = "",
    comments: list[LineComment] = (),  # type: ignore[assignment]
    commit: str = "",
    url: str = "",
    where: str = "",
    refusal: str = "",
    drafts: list[ReviewComment] = (),  # type: ignore[assignment]
) -> ReviewFeedback | None:
    """Record the review `key` and queue its one follow-up prompt, attributed to `reviewer`
    when they may prompt this session's repository; otherwise (or with a caller's `refusal`,
    e.g. no account here) the session is told why and nothing is queued. `drafts`: the
    dashboard's own comments, attached as they are. Returns None when `key` was queued
    already (a redelivery)."""
    comments = list(comments)
    everything = [*comments, *(_line_comment(d) for d in drafts)]
    with transaction.atomic():
        try:
            with transaction.atomic():
                feedback = ReviewFeedback.objects.create(
                    session=session, key=key[:100], source=source, reviewer=reviewer,
                    reviewer_login=login[:100], state=state[:30], body=body, commit=commit[:64],
                    url=url[:500],
                )  # fmt: skip
                for c in comments:
                    ReviewComment.objects.create(
                        session=session, feedback=feedback, external_id=c.external_id,
                        author=reviewer, author_login=login[:100], path=c.path[:1000],
                        line=c.line, side=c.side[:5], quoted=c.quoted, note=c.note[:300],
                        body=c.body, url=c.url[:500], state=ReviewComment.State.QUEUED,
                    )  # fmt: skip
        except IntegrityError:
            return None  # this review (or one of its comments) was queued before
        for draft in drafts:
            ReviewComment.objects.filter(pk=draft.pk).update(
                feedback=feedback, state=ReviewComment.State.QUEUED, note=draft.note,
                quoted=draft.quoted, line=draft.line,
            )  # fmt: skip
        if reviewer is None and not refusal:
            refusal = f"@{login} is not known here"
        if not refusal:
            text = prompt_text(
                login=login, state=state, body=body, comments=everything, where=where, url=url
            )
            try:
                prompt = prompt_queue(session=session, author=reviewer, text=text)
            except PermissionDenied:
                refusal = (
                    f"@{login} ({reviewer.get_username()}) may not prompt sessions of "
                    f"{session.repository.name}"
                )
            except SessionError as exc:
                refusal = str(exc)
            else:
                ReviewFeedback.objects.filter(pk=feedback.pk).update(prompt=prompt)
                feedback.prompt = prompt
        if refusal:
            ReviewFeedback.objects.filter(pk=feedback.pk).update(refusal=refusal[:2000])
            feedback.refusal = refusal
            feedback.comments.update(state=ReviewComment.State.REFUSED)
            append_event(
                session.pk,
                "error",
                {"phase": "review", "message": f"a review{where} by @{login} asked the agent "
                                               f"for changes, but it was not queued: {refusal}"},
            )  # fmt: skip
    return feedback


def _line_comment(draft: ReviewComment) -> LineComment:
    return LineComment(
        path=draft.path, line=draft.line, body=draft.body, side=draft.side, quoted=draft.quoted,
        note=draft.note,
    )  # fmt: skip


# -- the dashboard's own review (local repositories) -------------------------------------------
def _require_dashboard_review(session: Session, user) -> None:
    access.require_repo_permission(user, session.repository, roles.PROMPT_SESSION)
    host = code_host_for(session.repository)
    if host.name != LocalHost.name:
        raise SessionError(
            f"this session's pull request is on {host.name}: review it there, and its "
            "comments come back to the agent"
        )


def dashboard_comment_add(*, session: Session, author, path: str, line, body: str) -> ReviewComment:
    """A draft line comment on the session's newest change, by `author` (who may prompt it).
    SessionError says what is wrong with the file, line or text; PermissionDenied for a role
    that may not prompt."""
    _require_dashboard_review(session, author)
    path, body = (path or "").strip(), (body or "").strip()
    if not body:
        raise SessionError("the comment is empty; say what should change")
    if len(body.encode()) > MAX_COMMENT_BYTES:
        raise SessionError(f"the comment is longer than {MAX_COMMENT_BYTES:,} bytes; shorten it")
    try:
        number = int(str(line).strip())
    except ValueError:
        raise SessionError(f"line {line!r} is not a number; give a line of {path}") from None
    if number < 1:
        raise SessionError("lines are numbered from 1")
    patches = _file_patches(session)
    if path not in patches:
        listed = ", ".join(sorted(patches)[:10]) or "none yet"
        raise SessionError(f"{path or 'no file'} is not in this session's change; files: {listed}")
    quoted = quote_from_patch(patches[path], number)
    if quoted is None:
        raise SessionError(
            f"line {number} of {path} is not shown in the change; comment on a line the diff shows"
        )
    return ReviewComment.objects.create(
        session=session, author=author, author_login=author.get_username()[:100], path=path,
        line=number, quoted=quoted, body=body,
    )  # fmt: skip


def dashboard_review_submit(
    *, session: Session, reviewer, body: str = "", changes_requested: bool = False
) -> ReviewFeedback:
    """Submit `reviewer`'s draft comments (and summary) as one review: one follow-up prompt.
    A draft whose line a later turn removed is put on its file with a note."""
    _require_dashboard_review(session, reviewer)
    state = ASKS_FOR_CHANGES if changes_requested else "commented"
    with transaction.atomic():
        drafts = list(
            ReviewComment.objects.select_for_update()
            .filter(session=session, author=reviewer, state=ReviewComment.State.DRAFT)
            .order_by("created_at", "pk")
        )
        if not drafts and not (changes_requested and body.strip()):
            raise SessionError(
                "nothing to submit: add a line comment, or request changes with a summary"
            )
        patches = _file_patches(session)
        for draft in drafts:
            now = quote_from_patch(patches.get(draft.path, ""), draft.line or 0)
            if now is None or now.splitlines()[-1:] != draft.quoted.splitlines()[-1:]:
                draft.note = (
                    f"line {draft.line} no longer exists after a later change; "
                    "the comment is on the file"
                )
                draft.line = None
        feedback = review_feedback_queue(
            session=session, key=f"dashboard-{uuid.uuid4().hex}", source="dashboard",
            reviewer=reviewer, login=reviewer.get_username(), state=state, body=body.strip(),
            where=" in the dashboard", drafts=drafts,
        )  # fmt: skip
        if feedback is None:  # a fresh key cannot have been queued already
            raise SessionError("this review was already submitted")
        if feedback.refusal:  # rolled back with the atomic block: the drafts stay drafts
            raise SessionError(feedback.refusal)
        pr = PullRequest.objects.filter(session=session).first()
        if pr is not None:  # the review counts for the metrics like a code host's
            kinds = ReviewEvent.Kind
            kind = kinds.CHANGES_REQUESTED if changes_requested else kinds.COMMENTED
            record_review(
                pr, kind=kind, external_id=f"dashboard-review-{feedback.pk}", reviewer=reviewer,
                commit=pr.head_sha, where=" in the dashboard",
            )  # fmt: skip
    return feedback


# -- after the turn ----------------------------------------------------------------------------
def agent_answer(session: Session, prompt: Prompt) -> str:
    """What the agent said last in the turn that ran `prompt`."""
    said = (
        Event.objects.filter(session=session, kind="agent_message", payload__turn=prompt.order)
        .order_by("-seq")
        .values_list("payload__text", flat=True)
        .first()
    )
    return str(said or "").strip()


def review_comments_answer(*, session: Session, prompt: Prompt, commit: str) -> int:
    """After the turn that ran `prompt`: post the agent's answer as a reply to each comment of
    the review(s) it carried and record the commit that resolved them. Each comment is
    answered once (claimed with a compare-and-set); a reply the host refuses is an error event
    and the comment says so. Returns how many comments were answered."""
    comments = list(
        ReviewComment.objects.filter(
            feedback__prompt=prompt, state=ReviewComment.State.QUEUED
        ).select_related("feedback")
    )
    if not comments:
        return 0
    answer = agent_answer(session, prompt) or "(the agent said nothing about this comment)"
    resolved = (
        f"Addressed in {commit[:12]}." if commit else "No change to the code was needed or made."
    )
    reply = f"{shorten(answer, MAX_REPLY_CHARS)}\n\n{resolved}"
    pr = PullRequest.objects.filter(session=session).first()
    host = code_host_for(session.repository)
    answered = 0
    for comment in comments:
        claimed = ReviewComment.objects.filter(
            pk=comment.pk, state=ReviewComment.State.QUEUED
        ).update(
            state=ReviewComment.State.ANSWERED, reply=reply, resolved_commit=commit[:64],
            answered_at=timezone.now(),
        )  # fmt: skip
        if not claimed:
            continue
        answered += 1
        if not comment.external_id or pr is None:
            continue  # the dashboard's own comment: the reply is on the page
        try:
            url = host.reply_to_review_comment(pr, comment.external_id, reply)
        except Exception as exc:  # the turn's work is done: a refused reply must not fail it
            if not isinstance(exc, CodeHostError):
                log.exception("replying to review comment %s failed", comment.pk)
            ReviewComment.objects.filter(pk=comment.pk).update(
                state=ReviewComment.State.REPLY_FAILED
            )
            append_event(
                session.pk,
                "error",
                {"phase": "review", "message": f"the answer to the comment on {comment.path} "
                                               f"was not posted: {exc}"},
            )  # fmt: skip
            continue
        ReviewComment.objects.filter(pk=comment.pk).update(reply_url=url[:500])
    append_event(
        session.pk,
        "review_answered",
        {"turn": prompt.order, "comments": answered, "commit": commit,
         "message": f"answered {answered} review comment{'s' if answered != 1 else ''}"
                    + (f", resolved by {commit[:12]}" if commit else " without a change")},
    )  # fmt: skip
    return answered


def review_comments_for(session: Session):
    """The session's review comments for its page, oldest first."""
    return ReviewComment.objects.filter(session=session).select_related("feedback")
