"""The review agent: "Review this PR" starts a read-only session of purpose `review` on a pull
request's head commit. Its prompt holds the change (base...head, read from the mirror on the
worker) and asks for a final message with a fenced JSON block `{"summary", "comments"}`.

Read-only is the control, whatever the agent does: a review session never publishes (pulls.py
refuses it first thing), its code host pushes nothing and mints no contents-write token
(codehosts.py), its terminal cannot be typed in (terminal.py) and it starts no other session
(services.session_create).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from accounts import access
from approvals import audit
from sessions import services
from sessions.codehosts import CodeHostError, ReviewToPost, code_host_for
from sessions.events import append_event
from sessions.models import Prompt, PullRequest, ReviewComment, ReviewFeedback, Session
from sessions.pulls import published_head
from sessions.review_comments import agent_answer, quote_from_patch
from snapshots import mirror

log = logging.getLogger(__name__)
JSON_BLOCK = re.compile(r"```json[ \t]*\n(.*?)```", re.DOTALL)
AGENT_LOGIN = "review agent"
OFF, ON_REQUEST, EVERY_PR = "off", "request", "every"  # Repository.review_agent
POLICIES = (OFF, ON_REQUEST, EVERY_PR)
MAX_COMMENTS = 50

MAX_DIFF_CHARS = 60_000  # of the change quoted in the prompt (the prompt's limit is 100 kB)


def is_read_only(session: Session) -> bool:
    """Whether `session` may change nothing outside its sandbox (a review session)."""
    return session.purpose == Session.Purpose.REVIEW


def may_request_review(user, pull_request: PullRequest) -> bool:
    return any(
        access.has_repo_permission(user, pull_request.repository, permission)
        for permission in services.REVIEW_PERMISSIONS
    )


def review_prompt(pull_request: PullRequest, *, base: str, head: str, diff: str) -> str:
    """What the review agent is asked: review base...head, answer with the JSON block."""
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + "\n[… the rest of the diff is left out: it is too long]"
    return "\n".join([
        f"Review pull request {pull_request.branch} → {pull_request.base} "
        f"(the change {base[:12]}...{head[:12]}): {pull_request.title}",
        "",
        "Read the change below and review it as a careful colleague: bugs, missing tests, "
        f"security and clarity. /workspace holds the repository's {pull_request.base} without "
        "this change, for context. Change no file: this session is read-only and nothing it "
        "does is published.",
        "",
        "End your final message with exactly one fenced ```json block of this shape:",
        '{"summary": "<your review in a few sentences>", "comments": '
        '[{"path": "<file>", "line": <line number in the new file>, "body": "<comment>"}]}',
        "Comment only on lines the change adds or keeps (the right side of the diff).",
        "",
        "```diff",
        diff.rstrip(),
        "```",
    ])  # fmt: skip


def _change(pull_request: PullRequest) -> tuple[str, str, str]:
    """(base, head, diff) of the PR, read in the repository's mirror."""
    session = pull_request.session
    head = pull_request.head_sha or published_head(session)
    base = session.base_commit
    if not head or not base:
        raise services.SessionError(
            "this pull request has no pushed commits to review yet; send the agent a prompt first"
        )
    try:
        mirror_dir = mirror.mirror_path(pull_request.repository.name)
        diff = mirror.git("diff", f"{base}...{head}", cwd=mirror_dir)
    except (mirror.MirrorError, OSError) as exc:
        raise services.SessionError(
            f"the change {base[:12]}...{head[:12]} cannot be read: {exc}"
        ) from None
    return base, head, diff


def _patches(diff: str) -> dict[str, str]:
    """A unified diff split by file: new path → its patch (a deleted file keeps its old path)."""
    patches: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            current = [line]
            patches[line.split(" b/", 1)[-1]] = current
        elif current is not None:
            current.append(line)
    return {path: "\n".join(lines) for path, lines in patches.items()}


@dataclass
class AgentReview:
    """The review agent's answer, read from its final message, and what was wrong with it."""

    summary: str
    comments: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def review_parse(text: str) -> AgentReview:
    """Read `{"summary", "comments": [{"path", "line", "body"}]}` from the last fenced json
    block of `text`. Never raises: bad output keeps what can be kept (the whole message as
    the summary when there is no usable block) and says what was wrong in `problems`."""
    blocks = JSON_BLOCK.findall(text or "")
    if not blocks:
        return AgentReview(text.strip(), problems=["its answer held no ```json block"])
    try:
        data = json.loads(blocks[-1])
    except ValueError as exc:
        return AgentReview(
            JSON_BLOCK.sub("", text).strip(), problems=[f"its ```json block is not JSON ({exc})"]
        )
    if not isinstance(data, dict):
        return AgentReview(text.strip(), problems=["its ```json block is not an object"])
    review = AgentReview(str(data.get("summary") or "").strip())
    comments = data.get("comments") or []
    if not isinstance(comments, list):
        review.problems.append("its comments are not a list")
        comments = []
    for number, comment in enumerate(comments[:MAX_COMMENTS], 1):
        if not isinstance(comment, dict) or not str(comment.get("body") or "").strip():
            review.problems.append(f"comment {number} has no body")
            continue
        line = comment.get("line")
        review.comments.append({
            "path": str(comment.get("path") or "").strip().removeprefix("b/"),
            "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
            "body": str(comment["body"]).strip(),
        })  # fmt: skip
    if len(comments) > MAX_COMMENTS:
        review.problems.append(f"only its first {MAX_COMMENTS} comments are kept")
    return review


def review_post(*, session: Session, prompt: Prompt) -> str:
    """After a review session's turn: post its answer as a review of the PR it reviews (on
    GitHub as a COMMENT review; for a local repository stored as the PR's review comments,
    which never become a prompt by themselves). Once per turn; never raises: what went wrong
    is an `error` event on the review session, and the review is kept here whatever GitHub
    says. Returns one line saying what happened."""
    try:
        return _post(session, prompt)
    except Exception as exc:  # the turn's work is done; its review must not fail it
        log.exception("posting the review of session %s failed", session.pk)
        append_event(session.pk, "error", {"phase": "review", "message": (
            f"the review could not be posted: {exc.__class__.__name__}: {exc}"
        )})  # fmt: skip
        return f"not posted: {exc}"


def _post(session: Session, prompt: Prompt) -> str:
    pr = session.reviewed_pull_request
    if pr is None:
        return "the pull request under review is gone"
    review = review_parse(agent_answer(session, prompt))
    try:
        _, _, diff = _change(pr)
        patches = _patches(diff)
    except services.SessionError as exc:
        patches = {}
        review.problems.append(str(exc))
    on_lines: list[tuple[str, int, str, str]] = []  # path, line, body, quoted
    on_files: list[tuple[str, str, str]] = []  # path, body, note
    for c in review.comments:
        path, line, body = c["path"], c["line"], c["body"]
        if path not in patches:
            on_files.append((path, body, f"{path or '(no file)'} is not in the change"))
            continue
        quoted = quote_from_patch(patches[path], line) if line is not None else None
        if quoted is None:
            where = f"line {line}" if line is not None else "no line"
            on_files.append((path, body, f"{where} of {path} is not in the diff: on the file"))
            continue
        on_lines.append((path, line, body, quoted))
    body = review.summary or "(the review agent wrote no summary)"
    if review.problems:
        body += "\n\n> Note: the review agent's output was not as asked: " + "; ".join(
            review.problems
        )
    commit = session.reviewed_commit or pr.head_sha
    key = f"agent-review-{session.pk}-{prompt.order}"
    with transaction.atomic():
        try:
            with transaction.atomic():
                feedback = ReviewFeedback.objects.create(
                    session=pr.session, key=key, source=ReviewFeedback.Source.AGENT,
                    reviewer=None, reviewer_login=AGENT_LOGIN, state="commented", body=body,
                    commit=commit[:64],
                )  # fmt: skip
        except IntegrityError:
            return f"review {key} was posted before"
        for path, line, text, quoted in on_lines:
            ReviewComment.objects.create(
                session=pr.session, feedback=feedback, author_login=AGENT_LOGIN,
                path=path[:1000], line=line, quoted=quoted, body=text,
                state=ReviewComment.State.POSTED,
            )  # fmt: skip
        for path, text, note in on_files:
            ReviewComment.objects.create(
                session=pr.session, feedback=feedback, author_login=AGENT_LOGIN,
                path=path[:1000], line=None, note=note[:300], body=text,
                state=ReviewComment.State.POSTED,
            )  # fmt: skip
    where, url = "here", ""
    host = code_host_for(pr.repository)
    # On the host, comments off the diff go in the body: GitHub anchors review comments to lines.
    off_diff = "".join(f"\n\n**{p or '(no file)'}** ({n}): {t}" for p, t, n in on_files)
    try:
        posted = host.post_review(pr, ReviewToPost(
            commit=commit, body=body + off_diff,
            comments=[(path, line, text) for path, line, text, _ in on_lines],
        ))  # fmt: skip
    except CodeHostError as exc:
        ReviewFeedback.objects.filter(pk=feedback.pk).update(refusal=f"not posted: {exc}"[:2000])
        append_event(session.pk, "error", {"phase": "review", "message": (
            f"the review was not posted on the code host: {exc}; it is kept on the page of "
            f"session {pr.session_id}"
        )})  # fmt: skip
        return f"not posted: {exc}"
    if posted is not None:
        where, url = f"on {pr.url or pr.host}", posted.url
        ReviewFeedback.objects.filter(pk=feedback.pk).update(url=url[:500])
    message = (
        f"review posted {where} with {len(on_lines)} line comment"
        f"{'s' if len(on_lines) != 1 else ''}"
        + (f" and {len(on_files)} on a file" if on_files else "")
        + (" (the agent's output was not as asked)" if review.problems else "")
    )
    for target in {session.pk, pr.session_id}:
        append_event(target, "agent_review_posted", {
            "pull_request": pr.pk, "review_session": session.pk, "comments": len(on_lines),
            "file_comments": len(on_files), "url": url, "message": message,
        })  # fmt: skip
    return message


def review_session_start(*, pull_request: PullRequest, user) -> Session:
    """Start a review session of `pull_request`'s head commit, asked by `user` (an engineer,
    reviewer or admin of its repository: PermissionDenied otherwise). SessionError when the PR
    is not open or has nothing to review."""
    if not may_request_review(user, pull_request):  # before anything about the PR is read
        raise PermissionDenied(
            f"only engineers, reviewers and admins of {pull_request.repository.name} may ask "
            "for a review"
        )
    if pull_request.repository.review_agent == OFF:
        raise services.SessionError(
            f"the review agent is off for {pull_request.repository.name}; a repository admin "
            "can turn it on in Settings → Review agent"
        )
    if pull_request.state != PullRequest.State.OPEN:
        raise services.SessionError(f"the pull request is {pull_request.state}: nothing to review")
    base, head, diff = _change(pull_request)
    source = pull_request.session
    session = services.session_create(
        repository=pull_request.repository,
        creator=user,
        prompt=review_prompt(pull_request, base=base, head=head, diff=diff),
        agent=source.agent,
        agent_command=source.agent_command if source.agent == "command" else "",
        model=source.model,
        title=f"Review of {pull_request.branch}"[:200],
        purpose=Session.Purpose.REVIEW,
        reviewed_pull_request=pull_request,
        reviewed_commit=head,
    )
    audit.record(
        "review_session.start",
        actor=user,
        session=session,
        object_type="pull_request",
        object_id=pull_request.pk,
        data={"commit": head, "reviewed_session": source.pk},
    )
    return session


def review_on_open(pull_request: PullRequest) -> str:
    """A pull request has opened (a local one after the turn that opened it, a GitHub one on
    its `pull_request` opened webhook, whichever comes first): under the policy "every", start
    its one review session, asked on behalf of the PR's author. Once per PR (a compare-and-set
    on `auto_reviewed`): a redelivered webhook or a later turn starts none. Returns one line
    saying what happened."""
    repository = pull_request.repository
    if repository.review_agent != EVERY_PR:
        return ""
    if pull_request.state != PullRequest.State.OPEN:
        return ""
    claimed = PullRequest.objects.filter(pk=pull_request.pk, auto_reviewed=False).update(
        auto_reviewed=True
    )
    if not claimed:
        return "its review session was started before"
    author = pull_request.author or pull_request.session.creator
    try:
        review = review_session_start(pull_request=pull_request, user=author)
    except (PermissionDenied, services.SessionError) as exc:
        append_event(pull_request.session_id, "error", {"phase": "review", "message": (
            f"the review agent reviews every pull request of {repository.name}, but this "
            f"one's review could not start: {exc}"
        )})  # fmt: skip
        return f"its review could not start: {exc}"
    return f"review session {review.pk} started"


def review_agent_policy_set(*, repository, policy: str, by=None):
    """Set when the review agent reviews `repository`'s pull requests (POLICIES); audited.
    ValueError with the reason for a policy that is not one."""
    if policy not in POLICIES:
        raise ValueError(
            f"{policy!r} is not a review agent policy: use one of {', '.join(POLICIES)}"
        )
    before = repository.review_agent
    repository.review_agent = policy
    repository.save(update_fields=["review_agent"])
    audit.record(
        "repository.review_agent",
        actor=by,
        repository=repository,
        object_type="repository",
        object_id=repository.pk,
        data={"before": before, "after": policy},
    )
    return repository
