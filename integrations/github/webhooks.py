"""GitHub webhooks (`/webhooks/github/`): what GitHub tells us about the pull requests sessions
opened — reviews, merges, closes, new pushes, comments that ask the agent for more, reverts, and
CI results (check runs, check suites, commit statuses: integrations/github/checks.py).

`webhook_receive` is the one entry point. A delivery must be signed with GITHUB_WEBHOOK_SECRET
(`X-Hub-Signature-256`, HMAC-SHA256 of the raw body, compared in constant time); an unsigned or
wrongly signed one is refused (401) and nothing is recorded. Each `X-GitHub-Delivery` is applied
once: it is recorded as a WebhookDelivery in the same transaction as its effects, so a
redelivery after success changes nothing and a redelivery after a crash applies it again. The
delivery id is not signed, so effects that are not idempotent by nature are keyed too: a review
is recorded once per review id, a comment queues at most one prompt, a review's comments
queue at most one prompt (sessions/review_comments.py).
A submitted review that asks for changes reads its line comments from GitHub with the App's
token; when GitHub cannot be asked, nothing is recorded and the answer is 502, so the
delivery can be redelivered.
Events and actions this module does not handle, and repositories not linked here, are answered
202 with the reason and not recorded.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from allauth.socialaccount.models import SocialAccount
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts import access, roles
from approvals import audit
from inspect_web.sealing import SecretsUnavailable
from integrations.github import app_settings, checks
from integrations.github.codehost import github_host_for
from integrations.github.delivery import Ignored
from integrations.github.models import GitHubLink, WebhookDelivery
from sessions import pulls, review_agent, review_comments
from sessions.codehosts import CodeHostError
from sessions.events import append_event
from sessions.models import PullRequest, ReviewEvent, ReviewFeedback
from sessions.services import SessionError, prompt_queue
from sessions.totals import totals_changed

log = logging.getLogger(__name__)

REVIEW_KINDS = {
    "approved": ReviewEvent.Kind.APPROVED,
    "changes_requested": ReviewEvent.Kind.CHANGES_REQUESTED,
    "commented": ReviewEvent.Kind.COMMENTED,
}
# `git revert` writes the first; GitHub's "Revert" button opens a PR whose body says the second.
REVERTS_COMMIT = pulls.REVERTS_COMMIT
REVERTS_PR = re.compile(r"\bReverts? ([\w.-]+/[\w.-]+)#(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Answer:
    """What to answer GitHub: the HTTP status and one line saying what happened."""

    status: int
    outcome: str


class Unavailable(Exception):
    """What the delivery needs from GitHub cannot be read now: nothing is recorded (502), so
    a redelivery applies it."""


def signature_is_valid(body: bytes, signature: str | None) -> bool:
    """True when `signature` is `sha256=` + HMAC-SHA256 of `body` with GITHUB_WEBHOOK_SECRET."""
    secret = app_settings.webhook_secret()
    if not secret or not signature:
        return False
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode())


def _payload(body: bytes, content_type: str) -> dict[str, Any]:
    """The JSON payload; GitHub sends it form-encoded (`payload=…`) if the hook says so."""
    if content_type.startswith("application/x-www-form-urlencoded"):
        body = (parse_qs(body.decode()).get("payload") or [""])[0].encode()
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("the payload is not a JSON object")
    return data


def webhook_receive(
    *, event: str, delivery_id: str, signature: str | None, body: bytes, content_type: str = ""
) -> Answer:
    """Verify, de-duplicate and apply one delivery; never raises for bad input."""
    try:
        configured = bool(app_settings.webhook_secret())
    except SecretsUnavailable as exc:  # stored by Connect GitHub, but the key changed
        log.error(
            "GitHub webhook %s refused: the webhook secret cannot be read: %s", delivery_id, exc
        )
        return Answer(503, "the webhook secret stored here cannot be decrypted")
    if not configured:
        return Answer(
            401,
            "GitHub webhooks are not configured here: connect GitHub in Settings → GitHub or "
            "set GITHUB_WEBHOOK_SECRET",
        )
    if not signature_is_valid(body, signature):
        log.warning("GitHub webhook %s (%s) refused: bad or missing signature", delivery_id, event)
        return Answer(401, "the X-Hub-Signature-256 signature is missing or does not match")
    if not delivery_id or not event:
        return Answer(400, "X-GitHub-Delivery and X-GitHub-Event headers are required")
    try:
        payload = _payload(body, content_type)
    except ValueError:
        return Answer(400, "the body is not a JSON object")
    if event == "ping":
        return Answer(200, "pong")
    handler = HANDLERS.get(event)
    if handler is None:
        return Answer(202, f"ignored: {event} events are not used here")
    action = str(payload.get("action", ""))
    try:
        link = _link(event, payload)
        with transaction.atomic():
            try:
                with transaction.atomic():
                    delivery = WebhookDelivery.objects.create(
                        delivery_id=delivery_id[:100], event=event[:60], action=action[:60]
                    )
            except IntegrityError:
                seen = WebhookDelivery.objects.get(delivery_id=delivery_id[:100])
                return Answer(200, f"already handled: {seen.outcome or 'applied'}")
            outcome = handler(link, payload)
            WebhookDelivery.objects.filter(pk=delivery.pk).update(outcome=outcome[:300])
    except Ignored as exc:
        log.info("GitHub webhook %s (%s %s) ignored: %s", delivery_id, event, action, exc)
        return Answer(202, f"ignored: {exc}")
    except Unavailable as exc:
        log.warning("GitHub webhook %s (%s %s) not applied: %s", delivery_id, event, action, exc)
        return Answer(502, f"not applied: {exc}; redeliver it once GitHub answers")
    return Answer(200, outcome)


def _link(event: str, payload: dict) -> GitHubLink | None:
    if event == "installation":
        return None
    full_name = (payload.get("repository") or {}).get("full_name", "")
    link = (
        GitHubLink.objects.select_related("repository").filter(full_name__iexact=full_name).first()
    )
    if link is None:
        raise Ignored(f"no repository here is linked to {full_name or 'an unnamed repository'}")
    return link


def _pull_request(link: GitHubLink, number: Any) -> PullRequest:
    pr = (
        PullRequest.objects.select_related("session", "repository")
        .filter(repository=link.repository, host=PullRequest.Host.GITHUB, number=number)
        .first()
    )
    if pr is None:
        raise Ignored(f"{link.full_name}#{number} was not opened by a session here")
    return pr


def _when(value: Any) -> datetime:
    return (parse_datetime(value) if isinstance(value, str) else None) or timezone.now()


def user_for_github_id(github_id: Any):
    """The user who signed in here with the GitHub account whose numeric id this is (allauth's
    SocialAccount.uid), or None. Never by login: a login can be renamed and then taken by
    someone else, an id cannot."""
    if github_id is None or isinstance(github_id, bool) or not str(github_id).isdigit():
        return None
    account = (
        SocialAccount.objects.select_related("user")
        .filter(provider="github", uid=str(github_id))
        .first()
    )
    return account.user if account else None


def _audit(pr: PullRequest, action: str, data: dict) -> None:
    audit.record(
        action,
        actor_kind=audit.AuditEntry.ActorKind.SYSTEM,
        session=pr.session,
        object_type="pull_request",
        object_id=pr.pk,
        data=data,
    )


# -- pull_request -----------------------------------------------------------------------------
def on_pull_request(link: GitHubLink, payload: dict) -> str:
    action = payload.get("action")
    data = payload.get("pull_request") or {}
    pr = _pull_request(link, data.get("number", payload.get("number")))
    ref = f"{link.full_name}#{pr.number}"
    if action == "opened":
        PullRequest.objects.filter(pk=pr.pk, url="").update(url=data.get("html_url", ""))
        reviewing = review_agent.review_on_open(pr)
        return f"{ref} opened" + (f"; {reviewing}" if reviewing else "")
    if action == "closed" and data.get("merged"):
        merger = data.get("merged_by") or {}
        pulls.mark_merged(
            pr,
            merge_sha=data.get("merge_commit_sha") or "",
            merged_by=user_for_github_id(merger.get("id")),
            at=_when(data.get("merged_at")),
        )
        _audit(pr, "pull_request.merged", {"on": ref, "by": merger.get("login", "")})
        return f"{ref} merged"
    if action == "closed":
        pulls.mark_closed(pr, at=_when(data.get("closed_at")))
        _audit(pr, "pull_request.closed", {"on": ref, "by": _login(payload)})
        return f"{ref} closed without merging"
    if action == "reopened":
        pulls.mark_reopened(pr)
        _audit(pr, "pull_request.reopened", {"on": ref, "by": _login(payload)})
        return f"{ref} reopened"
    if action == "synchronize":
        head = (data.get("head") or {}).get("sha", "")
        # Our own push may be announced before publish_turn records its head.
        ours = head in (pr.head_sha, pulls.published_head(pr.session))
        PullRequest.objects.filter(pk=pr.pk).update(
            head_sha=head or pr.head_sha,
            additions=data.get("additions", pr.additions),
            deletions=data.get("deletions", pr.deletions),
            changed_files=data.get("changed_files", pr.changed_files),
        )
        totals_changed([pr.session_id])
        if not ours:
            append_event(
                pr.session_id,
                "pull_request_pushed_outside",
                {"pull_request": pr.pk, "head": head,
                 "message": f"{pr.branch} was updated on GitHub by {_login(payload)} "
                            f"(now at {head[:12]}); the session does not have those commits, "
                            "so its next push will not overwrite them"},
            )  # fmt: skip
        return f"{ref} now at {head[:12]}" + ("" if ours else " (pushed outside the session)")
    raise Ignored(f"pull_request action {action!r} is not used here")


def _login(payload: dict) -> str:
    return (payload.get("sender") or {}).get("login", "")


# -- pull_request_review ----------------------------------------------------------------------
def on_pull_request_review(link: GitHubLink, payload: dict) -> str:
    """A submitted review: a ReviewEvent (once per review id), the PR's first review time and
    its review rounds (how many distinct head commits were reviewed)."""
    if payload.get("action") != "submitted":
        raise Ignored(f"pull_request_review action {payload.get('action')!r} is not used here")
    review = payload.get("review") or {}
    kind = REVIEW_KINDS.get(str(review.get("state", "")).lower())
    if kind is None:
        raise Ignored(f"a review in state {review.get('state')!r} is not counted")
    pr = _pull_request(link, (payload.get("pull_request") or {}).get("number"))
    user = review.get("user") or {}
    login = user.get("login", "")
    at = _when(review.get("submitted_at"))
    ref = f"{link.full_name}#{pr.number}"
    recorded = pulls.record_review(
        pr, kind=kind, external_id=f"github-review-{review.get('id')}",
        reviewer=user_for_github_id(user.get("id")), login=login,
        commit=review.get("commit_id") or "", at=at, where=" on GitHub",
    )  # fmt: skip
    if recorded:
        _audit(pr, "pull_request.review", {"on": ref, "by": login, "kind": kind})
    outcome = (
        f"{kind} review by {login} on {ref}"
        if recorded
        else f"review {review.get('id')} on {ref} was already recorded"
    )
    asked = _review_feedback(link, pr, review, ref)
    return f"{outcome}; {asked}" if asked else outcome


def _review_feedback(link: GitHubLink, pr: PullRequest, review: dict, ref: str) -> str:
    """A review with line comments or "changes requested" becomes one follow-up prompt from
    the reviewer (once per review id); returns what happened ("" for a review that asks
    nothing)."""
    if (review.get("user") or {}).get("type") == "Bot":
        # The App's own replies to comments arrive as reviews too: they ask nothing.
        return "a review by a bot asks the agent nothing"
    key = f"github-review-{review.get('id')}"
    if ReviewFeedback.objects.filter(key=key).exists():
        return f"review {review.get('id')} already queued its comments"
    state = str(review.get("state", "")).lower()
    comments, unread = _line_comments(link, pr, review.get("id"))
    body = review.get("body") or ""
    if not review_comments.asks_for_changes(state, comments) or (not comments and not body):
        return unread if state == review_comments.ASKS_FOR_CHANGES else ""
    author = review.get("user") or {}
    login = author.get("login", "")
    reviewer, refusal = _github_member(author)
    feedback = review_comments.review_feedback_queue(
        session=pr.session, key=key, source="github", reviewer=reviewer, login=login,
        state=state, body=body, comments=comments, commit=review.get("commit_id") or "",
        url=review.get("html_url") or "", where=f" on {ref}", refusal=refusal,
    )  # fmt: skip
    if feedback is None:
        return f"review {review.get('id')} already queued its comments"
    if feedback.refusal:
        return f"its comments were not queued: {feedback.refusal}"
    return (
        f"follow-up prompt {feedback.prompt.order} queued with {len(comments)} "
        f"comment{'s' if len(comments) != 1 else ''}"
    )


def _line_comments(
    link: GitHubLink, pr: PullRequest, review_id: Any
) -> tuple[list[review_comments.LineComment], str]:
    """The review's line comments read from GitHub, and a note when they could not be read
    because no App is configured here. Unavailable when GitHub does not answer."""
    try:
        configured = app_settings.app_configured()
    except SecretsUnavailable as exc:
        raise Unavailable(f"the GitHub App's private key cannot be read: {exc}") from None
    host = github_host_for(link.repository) if configured else None
    if host is None:
        return [], "its line comments were not read: no GitHub App is configured here"
    try:
        raw = host.review_comments(pr, int(review_id))
    except (CodeHostError, TypeError, ValueError) as exc:
        raise Unavailable(f"the comments of review {review_id} could not be read: {exc}") from None
    return [_line_comment(c) for c in raw if (c.get("user") or {}).get("type") != "Bot"], ""


def _line_comment(comment: dict) -> review_comments.LineComment:
    """GitHub's review comment as the session keeps it. GitHub sets `line` to null on a
    comment whose line a later push removed (outdated): it is put on its file with a note."""
    line = comment.get("line")
    note = ""
    if comment.get("subject_type") != "file" and not isinstance(line, int):
        line = None
        was = comment.get("original_line")
        note = (
            f"line {was} it was on no longer exists after a later push; the comment is on the file"
        )
    return review_comments.LineComment(
        path=str(comment.get("path") or ""), line=line if isinstance(line, int) else None,
        body=str(comment.get("body") or ""), side=str(comment.get("side") or "RIGHT"),
        quoted=review_comments.quote_from_hunk(str(comment.get("diff_hunk") or "")), note=note,
        external_id=str(comment.get("id")), url=str(comment.get("html_url") or ""),
    )  # fmt: skip


def _github_member(author: dict) -> tuple[Any, str]:
    """The user here signed in with this GitHub account, or a refusal saying there is none
    (whether they may prompt is the session's rule, checked where the prompt is queued)."""
    user = user_for_github_id(author.get("id"))
    if user is None:
        return None, f"@{author.get('login', '')} has no account here signed in with GitHub"
    return user, ""


# -- pull_request_review_comment --------------------------------------------------------------
def on_pull_request_review_comment(link: GitHubLink, payload: dict) -> str:
    """A line comment: part of a review, whose `pull_request_review` (submitted) delivery
    queues all its comments as one prompt; recorded here, nothing queued."""
    if payload.get("action") != "created":
        raise Ignored(
            f"pull_request_review_comment action {payload.get('action')!r} is not used here"
        )
    comment = payload.get("comment") or {}
    pr = _pull_request(link, (payload.get("pull_request") or {}).get("number"))
    return (
        f"comment {comment.get('id')} on {link.full_name}#{pr.number} belongs to review "
        f"{comment.get('pull_request_review_id')}, which queues it when submitted"
    )


# -- issue_comment ----------------------------------------------------------------------------
def on_issue_comment(link: GitHubLink, payload: dict) -> str:
    """A comment on a session's PR that mentions the App queues a follow-up prompt, attributed
    to the commenter when they are a member who may prompt (else the session is told why not)."""
    if payload.get("action") != "created":
        raise Ignored(f"issue_comment action {payload.get('action')!r} is not used here")
    issue = payload.get("issue") or {}
    if not issue.get("pull_request"):
        raise Ignored("a comment on an issue, not on a pull request")
    comment = payload.get("comment") or {}
    author = comment.get("user") or {}
    if author.get("type") == "Bot":
        raise Ignored("a comment by a bot")
    slug = app_settings.app_slug()
    mention = re.compile(rf"@{re.escape(slug)}\b", re.IGNORECASE)
    body = comment.get("body") or ""
    if not mention.search(body):
        raise Ignored(f"the comment does not mention @{slug}")
    pr = _pull_request(link, issue.get("number"))
    login = author.get("login", "")
    ref = f"{link.full_name}#{pr.number}"
    # X-GitHub-Delivery is not signed: a captured delivery replayed under a new id must not
    # queue the prompt again, so a comment queues at most one (a concurrent replay fails on
    # the unique key and rolls back).
    queued_key = f"issue_comment/{comment.get('id')}"[:100]
    if WebhookDelivery.objects.filter(delivery_id=queued_key).exists():
        return f"comment {comment.get('id')} on {ref} already queued a prompt"
    user, refusal = _github_member(author)
    text = mention.sub("", body).strip()
    if user is not None:
        try:
            access.require_repo_permission(user, pr.repository, roles.PROMPT_SESSION)
            prompt = prompt_queue(
                session=pr.session,
                author=user,
                text=f"{text}\n\n(from @{login}'s comment on {ref}: {comment.get('html_url', '')})",
            )
        except PermissionDenied:
            refusal = f"@{login} ({user.get_username()}) may not prompt sessions of this repository"
        except SessionError as exc:
            refusal = str(exc)
    if refusal:
        append_event(
            pr.session_id,
            "error",
            {"phase": "github", "message": f"a comment on {ref} asked the agent for more, "
                                           f"but it was not queued: {refusal}"},
        )  # fmt: skip
        return f"comment on {ref} not queued: {refusal}"
    outcome = f"follow-up prompt {prompt.order} queued from @{login}'s comment on {ref}"
    WebhookDelivery.objects.create(
        delivery_id=queued_key, event="issue_comment", action="queued", outcome=outcome[:300]
    )
    return outcome


# -- push -------------------------------------------------------------------------------------
def on_push(link: GitHubLink, payload: dict) -> str:
    """A push to a base branch whose commits revert a merged PR: an escaped defect."""
    ref = str(payload.get("ref", ""))
    if not ref.startswith("refs/heads/"):
        raise Ignored(f"a push to {ref}, not to a branch")
    branch = ref.removeprefix("refs/heads/")
    merged = PullRequest.objects.filter(
        repository=link.repository, base=branch, state=PullRequest.State.MERGED,
        reverted_at__isnull=True,
    ).select_related("session")  # fmt: skip
    if not merged.exists():
        return f"push to {branch}: no merged pull request of a session targets it"
    found = []
    for commit in payload.get("commits") or []:
        message = commit.get("message") or ""
        candidates = []
        for sha in REVERTS_COMMIT.findall(message):
            candidates += [pr for pr in merged if pr.merge_sha and pr.merge_sha.startswith(sha)]
        for full_name, number in REVERTS_PR.findall(message):
            if full_name.lower() == link.full_name.lower():
                candidates += [pr for pr in merged if pr.number == int(number)]
        for pr in candidates:
            sha = str(commit.get("id", ""))[:64]
            if pulls.mark_reverted(pr, revert_sha=sha, at=_when(commit.get("timestamp")),
                                   branch=branch):  # fmt: skip
                found.append(pr.number or pr.pk)
    if not found:
        return f"push to {branch}: no revert of a session's pull request"
    return f"push to {branch} reverts " + ", ".join(f"#{n}" for n in found)


# -- installation -----------------------------------------------------------------------------
def on_installation(link: None, payload: dict) -> str:
    """The App was uninstalled or suspended: forget the installation, so the next publish looks
    it up again and reports clearly if it is gone."""
    action = payload.get("action")
    installation = (payload.get("installation") or {}).get("id")
    if action not in {"deleted", "suspend"} or installation is None:
        raise Ignored(f"installation action {action!r} is not used here")
    forgotten = GitHubLink.objects.filter(installation_id=installation).update(installation_id=None)
    return f"installation {installation} {action}: {forgotten} linked repositories forgot it"


HANDLERS = {
    "pull_request": on_pull_request,
    "pull_request_review": on_pull_request_review,
    "pull_request_review_comment": on_pull_request_review_comment,
    "issue_comment": on_issue_comment,
    "push": on_push,
    "installation": on_installation,
    "check_run": checks.on_check_run,
    "check_suite": checks.on_check_suite,
    "status": checks.on_status,
}
