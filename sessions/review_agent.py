"""The review agent: "Review this PR" starts a read-only session of purpose `review` on a pull
request's head commit. Its prompt holds the change (base...head, read from the mirror on the
worker) and asks for a final message with a fenced JSON block `{"summary", "comments"}`.

Read-only is the control, whatever the agent does: a review session never publishes (pulls.py
refuses it first thing), its code host pushes nothing and mints no contents-write token
(codehosts.py), and its terminal cannot be typed in (terminal.py).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from accounts import access
from approvals import audit
from sessions import services
from sessions.models import PullRequest, Session
from sessions.pulls import published_head
from snapshots import mirror

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
        "Read the change below (the repository is in /workspace) and review it as a careful "
        "colleague: bugs, missing tests, security and clarity. Change no file: this session is "
        "read-only and nothing it does is published.",
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


def review_session_start(*, pull_request: PullRequest, user) -> Session:
    """Start a review session of `pull_request`'s head commit, asked by `user` (an engineer,
    reviewer or admin of its repository: PermissionDenied otherwise). SessionError when the PR
    is not open or has nothing to review."""
    if not may_request_review(user, pull_request):  # before anything about the PR is read
        raise PermissionDenied(
            f"only engineers, reviewers and admins of {pull_request.repository.name} may ask "
            "for a review"
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
