"""A session's pull request: published after each turn that changed something, merged through the
approval gate. One PullRequest row per session (the idempotency key): retries and replays reuse it,
later turns push to the same branch."""

from __future__ import annotations

import contextlib
import logging
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import Truncator, slugify

from approvals import audit, gate
from approvals.secrets import SecretsUnavailable, secrets_found_in
from sessions.change_summary import change_summary, summary_markdown
from sessions.codehosts import (
    AlreadyMerged,
    BranchTaken,
    CodeHostError,
    code_host_for,
    publish_ref,
)
from sessions.events import append_event
from sessions.models import Event, PullRequest, ReviewEvent, Session, State
from sessions.rendering import latest_diff_payloads
from sessions.screenshots import screenshot_markdown
from sessions.services import session_transition
from sessions.totals import totals_changed
from sessions.verify_check import publish_verification
from sessions.workspace_git import GIT
from snapshots import mirror
from snapshots.models import Repository
from snapshots.sandbox import Sandbox, SandboxError

log = logging.getLogger(__name__)
# How git names what a revert undoes (git revert's message).
REVERTS_COMMIT = re.compile(r"This reverts commit ([0-9a-f]{7,64})", re.IGNORECASE)
MERGE_PR = "merge_pr"
BUNDLE = ".git/inspect-publish.bundle"
RENAME_ATTEMPTS = 5


def branch_name(session: Session) -> str:
    return f"inspect/{session.pk}-{slugify(session.title)[:40].strip('-') or 'session'}"


LONG_SESSION_TURNS = 3  # from this many turns the body says what each one did


def pr_body(session: Session) -> str:
    """What a reviewer reads first: what changed and why, the risk, the evidence (verification,
    screenshots); then the task in full, what each turn did in a long session, and a link back."""
    events = Event.objects.filter(session=session)
    prompts = list(session.prompts.order_by("order").values_list("order", "text"))
    first_text = prompts[0][1] if prompts else session.title
    summary = (
        events.filter(kind="agent_message").order_by("-seq").values_list("payload", flat=True)
    ).first() or {}
    newest_turn = (
        events.filter(kind="command", payload__phase="verify")
        .order_by("-seq")
        .values_list("payload__turn", flat=True)
        .first()
    )
    verify = (
        events.filter(kind="command", payload__phase="verify", payload__turn=newest_turn)
        if newest_turn is not None
        else events.none()
    )
    lines = ["## What changed and why\n"]
    if summary.get("text"):
        lines.append(f"{summary['text']}\n")
    asked_for = first_text.splitlines()[0] if first_text else ""
    lines.append(f"Asked for: {Truncator(asked_for).chars(200)}\n")
    risk = summary_markdown(change_summary(latest_diff_payloads(session)))
    if risk:
        lines.append(risk)
    if verify:
        lines.append("## Verification\n")
        for command in verify.order_by("seq"):
            p = command.payload
            mark = "✅" if p.get("ok") else "❌"
            lines.append(f"- {mark} `{p.get('command')}` ({p.get('duration_ms')} ms)")
        lines.append("")
    shots = screenshot_markdown(session, settings.PUBLIC_URL)  # before/after, signed links
    if shots:
        lines.append(shots)
    lines.append(f"## Task\n\n{first_text}\n")
    follow_ups = [text for order, text in prompts if order > 1]
    if follow_ups:
        asked = "\n".join(f"- {Truncator(text.splitlines()[0]).chars(200)}" for text in follow_ups)
        lines.append(f"Then:\n\n{asked}\n")
    if len(prompts) >= LONG_SESSION_TURNS:
        lines.append(_turns_markdown(session, dict(prompts)))
    lines.append(f"Session: {settings.PUBLIC_URL}{session.get_absolute_url()}")
    return "\n".join(lines)


def _turns_markdown(session: Session, prompts: dict[int, str]) -> str:
    """One line per finished turn: what was asked, the agent's last word in it, its checks."""
    said: dict[int, str] = {}
    checks: dict[int, bool] = {}
    last_message = ""
    kinds = ("agent_message", "turn_finished", "command")
    for kind, payload in (
        Event.objects.filter(session=session, kind__in=kinds)
        .order_by("seq")
        .values_list("kind", "payload")
    ):
        if kind == "agent_message":
            last_message = str(payload.get("text") or "")
        elif kind == "command" and payload.get("phase") == "verify":
            turn = payload.get("turn")
            checks[turn] = checks.get(turn, True) and bool(payload.get("ok"))
        elif kind == "turn_finished":
            said[payload.get("turn")] = last_message
            last_message = ""
    lines = ["## Turns\n"]
    for turn in sorted(t for t in said if t in prompts):
        asked = Truncator(prompts[turn].splitlines()[0] if prompts[turn] else "").chars(120)
        answer = Truncator(said[turn].splitlines()[0] if said[turn] else "").chars(200)
        mark = {True: " ✅", False: " ❌"}.get(checks.get(turn), "")
        lines.append(f"{turn}. {asked}{mark}" + (f" — {answer}" if answer else ""))
    return "\n".join(lines) + "\n"


def _export_commits(session: Session, sandbox: Sandbox) -> str:
    """Bundle the session's commits in the sandbox and fetch them into the mirror; returns the
    head commit. Only git objects cross the boundary; no credential goes in."""
    base = shlex.quote(session.base_commit)
    result = sandbox.run(
        f"{GIT} bundle create {BUNDLE} {base}..HEAD && {GIT} rev-parse HEAD",
        cwd="/workspace",
        timeout=120,
    )
    if not result.ok:
        raise CodeHostError(f"bundling the session's commits failed: {result.stderr[-400:]}")
    head = result.stdout.strip().splitlines()[-1]
    data = sandbox.read_file(BUNDLE)
    sandbox.run(f"rm -f {BUNDLE}", cwd="/workspace", timeout=30)
    mirror_dir = mirror.mirror_path(session.repository.name)
    bundle_file = mirror_dir / f"inspect-publish-{session.pk}.bundle"
    bundle_file.write_bytes(data)
    staged = f"refs/inspect/staged/{session.pk}"
    try:
        mirror.git("fetch", "--quiet", str(bundle_file), f"+HEAD:{staged}", cwd=mirror_dir)
        _refuse_secrets(session, mirror_dir, f"{session.base_commit}..{staged}")
        mirror.git("update-ref", publish_ref(session.pk), staged, cwd=mirror_dir)
    except mirror.MirrorError as exc:
        raise CodeHostError(f"reading the session's commits failed: {exc}") from None
    finally:
        bundle_file.unlink(missing_ok=True)
        with contextlib.suppress(mirror.MirrorError):
            mirror.git("update-ref", "-d", staged, cwd=mirror_dir)
    return head


def _refuse_secrets(session: Session, mirror_dir, commits: str) -> None:
    """Nothing that holds a repository secret's value leaves the platform: every commit's
    patch (history included, not only the final tree) is checked before it can be pushed."""
    patches = mirror.git("log", "--patch", "--text", "--format=%B", commits, cwd=mirror_dir)
    try:
        found = secrets_found_in(session.repository, patches)
    except SecretsUnavailable as exc:
        raise CodeHostError(f"the commits cannot be checked for secrets: {exc}") from None
    if found:
        raise CodeHostError(
            f"not published: the session's commits contain the value of the repository "
            f"secret{'s' if len(found) > 1 else ''} {', '.join(found)}. Remove it from the "
            "files and their history (ask the agent, or fix it in the terminal) and send "
            "another prompt"
        )


def published_head(session: Session) -> str:
    """The commit this session last handed to its code host ("" if none)."""
    try:
        mirror_dir = mirror.mirror_path(session.repository.name)
        return mirror.git("rev-parse", "--verify", "--quiet", publish_ref(session.pk),
                          cwd=mirror_dir).strip()  # fmt: skip
    except (mirror.MirrorError, OSError):
        return ""


def _push(host, session: Session, branch: str, *, renaming: bool) -> str:
    """Push to `branch`; before the PR exists, a name taken on the remote by someone else's
    commits is left alone and the next free `-2`, `-3`… is used instead. Returns the branch."""
    for attempt in range(1, RENAME_ATTEMPTS + 1):
        name = branch if attempt == 1 else f"{branch}-{attempt}"
        try:
            host.push(session.pk, name)
        except BranchTaken as exc:
            if not renaming:
                raise CodeHostError(
                    f"{exc}; take those commits into the session or drop them on the code host, "
                    "then send another prompt"
                ) from None
            if attempt == RENAME_ATTEMPTS:
                raise CodeHostError(
                    f"{exc}; rename or delete it, then send another prompt"
                ) from None
            note = f"{exc}; pushing to {branch}-{attempt + 1} instead"
            append_event(session.pk, "publish_note", {"message": note})
            continue
        return name
    raise AssertionError("unreachable")


def publish_changes(
    session: Session, sandbox: Sandbox, *, fence: int | None = None, verified: bool = True
) -> None:
    """publish_turn for callers whose own work must not fail with it (a turn, hand edits:
    `verified` False): anything unexpected becomes an `error` event on the session."""
    try:
        publish_turn(session, sandbox, fence=fence, verified=verified)
    except Exception as exc:
        log.exception("publishing session %s failed", session.pk)
        append_event(session.pk, "error", {"message": f"publishing failed: {exc}"})


def publish_turn(
    session: Session, sandbox: Sandbox, *, fence: int | None = None, verified: bool = True
):
    """Push the session's branch and open its pull request once, and publish the turn's
    verification as a check on the head (`verified` False: hand edits no turn verified);
    returns the PullRequest, or None when nothing changed. Errors become an `error` event; the
    turn's work stays."""
    session.refresh_from_db()
    if session.purpose == Session.Purpose.REVIEW:
        # Read-only, whatever its agent did: nothing is exported, pushed or opened.
        if (session.diff_stats or {}).get("files"):
            append_event(session.pk, "publish_note", {"message": (
                "this is a read-only review session: its changes stay in its sandbox and are "
                "never pushed or opened as a pull request"
            )})  # fmt: skip
        return None
    stats = session.diff_stats or {}
    if not settings.AUTO_PULL_REQUEST or not stats.get("files"):
        return None
    host = code_host_for(session.repository, read_only=session.purpose == Session.Purpose.REVIEW)
    existing = PullRequest.objects.filter(session=session).first()
    if existing is not None and existing.state != PullRequest.State.OPEN:
        _report_unpublished(session, sandbox, existing)  # later turns do not reopen it
        return existing
    branch = existing.branch if existing else branch_name(session)
    try:
        head = _export_commits(session, sandbox)
        branch = _push(host, session, branch, renaming=existing is None)
        if existing is None:
            first = session.prompts.order_by("order").select_related("author").first()
            author = first.author if first else session.creator
            title = session.title[:300]
            body = pr_body(session)
            opened = host.open_pull(
                branch=branch, base=session.branch, title=title, body=body, author=author
            )
            with transaction.atomic():
                pr, created = PullRequest.objects.get_or_create(
                    session=session,
                    defaults={
                        "repository": session.repository,
                        "host": host.name,
                        "number": opened.number,
                        "url": opened.url,
                        "branch": branch,
                        "base": session.branch,
                        "title": title,
                        "body": body,
                        "author": author,
                        "opened_as_app": opened.opened_as_app,
                    },
                )
            if created:
                audit.record(
                    "pull_request.open",
                    actor_kind=audit.AuditEntry.ActorKind.SYSTEM,
                    session=session,
                    object_type="pull_request",
                    object_id=pr.pk,
                    data={"host": host.name, "branch": branch, "number": opened.number,
                          "opened_as_app": opened.opened_as_app},
                )  # fmt: skip
        else:
            pr, created = existing, False
            body = pr_body(session)
            if body != pr.body:  # the follow-ups, summary and verification of this turn
                host.update_pull(pr, body=body)
        PullRequest.objects.filter(pk=pr.pk).update(
            body=body,
            head_sha=head,
            additions=stats.get("added", 0),
            deletions=stats.get("removed", 0),
            changed_files=stats.get("files", 0),
        )
        totals_changed([session.pk])
    except CodeHostError as exc:
        append_event(session.pk, "error", {"message": str(exc), "phase": "publish"})
        return None
    pr.refresh_from_db()
    append_event(
        session.pk,
        "pull_request_published",
        {"pull_request": pr.pk, "pr_url": pr.url or session.get_absolute_url() + "#pull-request",
         "branch": branch, "head": head, "opened": created, "host": host.name,
         "opened_as_app": pr.opened_as_app},
    )  # fmt: skip
    publish_verification(session, pr, head=head, by_hand=not verified)
    if session.state == State.IDLE:
        session_transition(session, State.PR_OPEN, fence=fence, reason=f"pull request {branch}")
    return pr


def _report_unpublished(session: Session, sandbox: Sandbox, pr: PullRequest) -> None:
    """Work done after the PR was merged or closed (e.g. on the code host, during a turn) has
    nowhere to go: say so on the session, rather than leave it unpushed silently."""
    try:
        head = sandbox.run(f"{GIT} rev-parse HEAD", cwd="/workspace", timeout=30)
    except SandboxError:
        return  # the sandbox is gone: its work is in the session's snapshot, nothing to say
    if not head.ok or head.stdout.strip() == published_head(session):
        return
    if pr.state == PullRequest.State.MERGED:
        why, then = "is already merged", "start a new session to propose it"
    else:
        why, then = "was closed without merging", "reopen it and send another prompt to push it"
    append_event(
        session.pk,
        "error",
        {"phase": "publish",
         "message": f"not pushed: the pull request for {pr.branch} {why}, so this change is "
                    f"only in the session; {then}"},
    )  # fmt: skip


# -- reviews ----------------------------------------------------------------------------------
def record_review(
    pr: PullRequest, *, kind: str, external_id: str, reviewer=None, login: str = "",
    commit: str = "", at=None, where: str = "",
) -> bool:  # fmt: skip
    """Record one review of `pr` (from the code host or the dashboard) once per `external_id`:
    a ReviewEvent, a `review` event on the session, the PR's first review time and its review
    rounds (how many distinct head commits were reviewed). Returns False for a replay."""
    at = at or timezone.now()
    login = login or (reviewer.get_username() if reviewer else "")
    _, created = ReviewEvent.objects.get_or_create(
        external_id=external_id,
        defaults={"pull_request": pr, "reviewer": reviewer, "reviewer_login": login[:100],
                  "kind": kind, "created_at": at},
    )  # fmt: skip
    if not created:
        return False
    label = ReviewEvent.Kind(kind).label.lower()
    append_event(
        pr.session_id,
        "review",
        {"pull_request": pr.pk, "review": kind, "reviewer": login, "commit": commit,
         "message": f"{login} reviewed{where}: {label}"},
    )  # fmt: skip
    reviewed = (
        Event.objects.filter(session_id=pr.session_id, kind="review")
        .values_list("payload__commit", flat=True)
        .distinct()
    )
    PullRequest.objects.filter(pk=pr.pk).update(review_rounds=len(set(reviewed)))
    PullRequest.objects.filter(pk=pr.pk, first_review_at__isnull=True).update(first_review_at=at)
    PullRequest.objects.filter(pk=pr.pk, first_review_at__gt=at).update(first_review_at=at)
    totals_changed([pr.session_id])
    return True


def review_merge_decision(sender, *, approval, user, approve: bool, **kwargs) -> None:
    """A merge approved or rejected in the dashboard is the review of a local pull request
    (a GitHub one is reviewed on GitHub, and its webhook records that)."""
    if approval.action != MERGE_PR:
        return
    pr = PullRequest.objects.filter(pk=approval.payload.get("pull_request")).first()
    if pr is None or pr.host != PullRequest.Host.LOCAL:
        return
    kind = ReviewEvent.Kind.APPROVED if approve else ReviewEvent.Kind.CHANGES_REQUESTED
    record_review(pr, kind=kind, external_id=f"approval-{approval.pk}", reviewer=user,
                  commit=approval.payload.get("head", ""), where=" in the dashboard")  # fmt: skip


# -- reverts: escaped defects -----------------------------------------------------------------
def mark_reverted(pr: PullRequest, *, revert_sha: str, at, branch: str) -> bool:
    """Record once that merged `pr` was reverted on `branch` (an escaped defect)."""
    if not PullRequest.objects.filter(pk=pr.pk, reverted_at__isnull=True).update(
        reverted_at=at, revert_sha=revert_sha[:64]
    ):
        return False
    totals_changed([pr.session_id])
    append_event(
        pr.session_id,
        "pull_request_reverted",
        {"pull_request": pr.pk, "revert_sha": revert_sha,
         "message": f"{pr.branch} was reverted on {branch} by {revert_sha[:12]}"},
    )  # fmt: skip
    audit.record(
        "pull_request.reverted",
        actor_kind=audit.AuditEntry.ActorKind.SYSTEM,
        session=pr.session,
        object_type="pull_request",
        object_id=pr.pk,
        data={"revert": revert_sha, "on": branch},
    )
    return True


def detect_local_reverts(
    sender: object = None, *, repository: Repository, mirror_dir: Path, **kwargs: object
) -> int:
    """A local repository sends no push webhook: after each fetch of its mirror (the build's
    `mirror_fetched` signal), commits on a merged PR's base branch since its merge that revert
    the merge mark it reverted. Returns how many were found."""
    merged = PullRequest.objects.filter(
        repository=repository, host=PullRequest.Host.LOCAL, state=PullRequest.State.MERGED,
        reverted_at__isnull=True,
    ).exclude(merge_sha="").select_related("session")  # fmt: skip
    found = 0
    for pr in merged:
        try:
            since_merge = f"{pr.merge_sha}..refs/heads/{pr.base}"
            history = mirror.git("log", "--format=%H%x00%ct%x00%B%x1e", since_merge, cwd=mirror_dir)
        except mirror.MirrorError:
            continue  # the base branch or the merge is gone from the mirror: nothing to read
        for entry in filter(str.strip, history.split("\x1e")):
            sha, seconds, message = entry.strip("\n").split("\x00", 2)
            if any(pr.merge_sha.startswith(s) for s in REVERTS_COMMIT.findall(message)):
                at = datetime.fromtimestamp(int(seconds), tz=UTC)
                found += mark_reverted(pr, revert_sha=sha, at=at, branch=pr.base)
                break
    return found


# -- merging, through the approval gate --------------------------------------------------------
def request_merge(pr: PullRequest, user):
    """Ask to merge: an approval request (four eyes), executed by the worker once approved."""
    if pr.state != PullRequest.State.OPEN:
        raise gate.ApprovalError(f"the pull request is {pr.state}; there is nothing to merge")
    first = pr.session.prompts.order_by("order").select_related("author").first()
    return gate.request_approval(
        action=MERGE_PR,
        payload={"pull_request": pr.pk, "branch": pr.branch, "base": pr.base,
                 "head": pr.head_sha, "title": pr.title},
        session=pr.session,
        requested_by=user,
        prompt_author=first.author if first else pr.author,
        idempotency_key=f"merge_pr:{pr.pk}:{pr.head_sha}",
    )  # fmt: skip


def execute_merge(approval) -> dict:
    """The `merge_pr` executor: runs once per approved request (the gate sees to that)."""
    pr = PullRequest.objects.select_related("session", "repository").get(
        pk=approval.payload["pull_request"]
    )
    if pr.state == PullRequest.State.MERGED:
        raise gate.ActionNoLongerApplies(f"pull request {pr.branch} is already merged")
    if pr.state == PullRequest.State.CLOSED:
        raise gate.ActionNoLongerApplies(f"pull request {pr.branch} was closed")
    if approval.payload.get("head") and approval.payload["head"] != pr.head_sha:
        raise gate.ActionNoLongerApplies(
            "the branch changed since the merge was requested; request it again"
        )
    host = code_host_for(pr.repository)
    try:
        sha = host.merge(pr, merged_by=approval.decided_by)
    except AlreadyMerged as exc:
        # Done elsewhere meanwhile: record what the code host says, then fail with the reason.
        if exc.closed:
            mark_closed(pr)
        else:
            mark_merged(pr, merge_sha=exc.sha)
        raise gate.ActionNoLongerApplies(str(exc)) from None
    mark_merged(pr, merge_sha=sha, merged_by=approval.decided_by)
    return {"merged": True, "merge_sha": sha, "base": pr.base}


def mark_merged(pr: PullRequest, *, merge_sha: str = "", merged_by=None, at=None) -> None:
    """Record a merge (done here or seen in a webhook) once, and move the session to merged."""
    updated = (
        PullRequest.objects.filter(pk=pr.pk)
        .exclude(state=PullRequest.State.MERGED)
        .update(
            state=PullRequest.State.MERGED,
            merge_sha=merge_sha,
            merged_by=merged_by,
            merged_at=at or timezone.now(),
        )
    )
    if not updated:
        return
    totals_changed([pr.session_id])
    append_event(pr.session_id, "pull_request_merged", {"pull_request": pr.pk, "sha": merge_sha})
    session = Session.objects.get(pk=pr.session_id)
    if session.state == State.PR_OPEN:
        session_transition(session, State.MERGED, reason=f"{pr.branch} merged")


def mark_closed(pr: PullRequest, *, at=None) -> None:
    if not PullRequest.objects.filter(pk=pr.pk, state=PullRequest.State.OPEN).update(
        state=PullRequest.State.CLOSED, closed_at=at or timezone.now()
    ):
        return
    totals_changed([pr.session_id])
    append_event(pr.session_id, "pull_request_closed", {"pull_request": pr.pk})
    session = Session.objects.get(pk=pr.session_id)
    if session.state == State.PR_OPEN:
        session_transition(session, State.CLOSED, reason=f"{pr.branch} closed")


def mark_reopened(pr: PullRequest) -> None:
    if not PullRequest.objects.filter(pk=pr.pk, state=PullRequest.State.CLOSED).update(
        state=PullRequest.State.OPEN, closed_at=None
    ):
        return
    totals_changed([pr.session_id])
    session = Session.objects.get(pk=pr.session_id)
    if session.state == State.CLOSED:
        session_transition(session, State.PR_OPEN, reason=f"{pr.branch} reopened")


gate.register_executor(MERGE_PR, execute_merge)
gate.approval_decided.connect(review_merge_decision, dispatch_uid="review-merge-decision")
mirror.mirror_fetched.connect(detect_local_reverts, dispatch_uid="detect-local-reverts")
