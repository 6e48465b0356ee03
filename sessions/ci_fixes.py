"""CI results fed back to the session whose pull request they concern, whatever code host reports
them (integrations/github/checks.py parses GitHub's): each check is recorded, and a failed check
on the PR's head commit queues a follow-up prompt "CI failed: …", asked by the system on the PR
author's behalf, under the repository's policy (Repository.ci_fix_policy, .ci_fix_attempts):

- `auto` (the default): a fix turn is queued at once, up to `ci_fix_attempts` per PR (2);
- `ask`: the session page offers it (`ci_fix_offered`) and a member queues it with a button;
- `off`: the result is only recorded.

At most one decision per head commit (CIFix's unique key): a second failing check on the same
commit, a check suite after its check runs, or a replayed delivery find the first. A check on a
commit that is not the head decides nothing and says why; past the limit a
`ci_fix_limit_reached` event says so and nothing is queued. When the check then reports on the
new head, the fix's `outcome` records whether it went green (the Metrics page counts both).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from accounts import access, roles
from approvals import audit
from sessions import services
from sessions.events import append_event
from sessions.models import CheckResult, CIFix, Prompt, PullRequest
from sessions.pulls import published_head
from sessions.totals import totals_changed
from snapshots.models import Repository

log = logging.getLogger(__name__)

FAILED = frozenset({"failure", "timed_out", "error", "startup_failure"})
PASSED = frozenset({"success"})
AUTO, ASK, OFF = "auto", "ask", "off"
POLICIES = (AUTO, ASK, OFF)
MAX_ATTEMPTS = 20


@dataclass(frozen=True)
class ReportedCheck:
    """A check as a code host reported it. `key` is its id there (one row per check);
    `status` is queued, in_progress or completed; `conclusion` is set once completed."""

    key: str
    source: str  # CheckResult.Source
    name: str
    commit: str
    status: str
    conclusion: str = ""
    summary: str = ""
    excerpt: str = ""
    url: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "completed" and self.conclusion in FAILED


# Fetches the failing check's summary and output excerpt from the code host (its token, its
# API), asked only for a failed check that is new here: (summary, excerpt).
Details = Callable[[ReportedCheck], tuple[str, str]]


def is_pr_head(pr: PullRequest, commit: str) -> tuple[bool, str]:
    """Whether `commit` is the PR's head, and the head: the one recorded or, for a push whose
    CI reports before publishing recorded it, the one the session last pushed."""
    if commit and commit == pr.head_sha:
        return True, commit
    pushed = published_head(pr.session)
    return bool(commit) and commit == pushed, pr.head_sha or pushed


def record_check(pr: PullRequest, check: ReportedCheck, *, details: Details | None = None) -> str:
    """Record `check` on `pr` (once per state it reports) and, when it failed on the PR's head,
    decide the fix under the repository's policy. Returns one line saying what happened (the
    webhook delivery log keeps it). Call inside a transaction."""
    if not check.url.startswith(("https://", "http://")):
        check = replace(check, url="")  # shown as a link: no javascript: or data: URL
    on_head, head = is_pr_head(pr, check.commit)
    where = f"{check.name} on {check.commit[:12]}"
    seen = CheckResult.objects.select_for_update().filter(key=check.key[:200]).first()
    if seen is not None and (seen.commit, seen.status, seen.conclusion) == (
        check.commit, check.status, check.conclusion
    ):  # fmt: skip
        return f"{where} already recorded ({check.conclusion or check.status})"
    if check.failed and details is not None:
        try:
            summary, excerpt = details(check)
        except Exception as exc:  # the code host is down: what the delivery said is kept
            log.warning("the details of %s could not be fetched: %s", where, exc)
            summary, excerpt = check.summary, check.excerpt
        check = replace(check, summary=summary or check.summary, excerpt=excerpt or check.excerpt)
    fields = {
        "pull_request": pr, "source": check.source, "name": check.name[:200],
        "commit": check.commit[:64], "status": check.status[:20],
        "conclusion": check.conclusion[:20], "summary": check.summary,
        "excerpt": check.excerpt, "url": check.url[:500], "on_head": on_head,
    }  # fmt: skip
    try:
        with transaction.atomic():
            result, _ = CheckResult.objects.update_or_create(key=check.key[:200], defaults=fields)
    except IntegrityError:  # the same check delivered twice at once: the other one records it
        return f"{where} is being recorded by another delivery"
    if check.status != "completed":
        return f"{where} is {check.status}"
    _settle_fixes(pr, check, on_head=on_head)
    if not check.failed:
        _event(pr, check, on_head, f"{check.name} {check.conclusion} on {check.commit[:12]}")
        return f"{where}: {check.conclusion}"
    note = _decide(pr, check, head=head, on_head=on_head)
    CheckResult.objects.filter(pk=result.pk).update(note=note[:300])
    return f"{where} failed: {note}"


def _event(pr: PullRequest, check: ReportedCheck, on_head: bool, message: str) -> None:
    append_event(
        pr.session_id,
        "check_result",
        {"pull_request": pr.pk, "source": check.source, "name": check.name,
         "commit": check.commit, "on_head": on_head, "conclusion": check.conclusion,
         "summary": check.summary, "excerpt": check.excerpt, "url": check.url,
         "message": message},
    )  # fmt: skip


def _decide(pr: PullRequest, check: ReportedCheck, *, head: str, on_head: bool) -> str:
    """What a failed check does: nothing (with the reason), an offer, a fix turn, or the limit."""
    repository = pr.repository
    failed = f"{check.name} failed on {check.commit[:12]}"
    if not on_head:
        note = f"not the pull request's head ({head[:12] or 'unknown'}): no fix is queued"
        _event(pr, check, on_head, f"{failed}, {note}")
        return note
    if pr.state != PullRequest.State.OPEN:
        note = f"the pull request is {pr.state}: no fix is queued"
        _event(pr, check, on_head, f"{failed}; {note}")
        return note
    if repository.ci_fix_policy == OFF:
        note = f"CI fixes are off for {repository.name}: recorded only"
        _event(pr, check, on_head, f"{failed}; {note}")
        return note
    _event(pr, check, on_head, failed)
    try:
        with transaction.atomic():
            fix = CIFix.objects.create(
                pull_request=pr, commit=check.commit[:64], check_name=check.name[:200],
                state=CIFix.State.OFFERED,
            )  # fmt: skip
    except IntegrityError:
        earlier = CIFix.objects.get(pull_request=pr, commit=check.commit[:64])
        return f"{earlier.check_name} already decided a CI fix for this commit ({earlier.state})"
    used = _attempts_used(pr)
    limit = repository.ci_fix_attempts
    if used >= limit:
        CIFix.objects.filter(pk=fix.pk).update(state=CIFix.State.LIMIT)
        message = (
            f"{check.name} failed again, but this pull request has used its {limit} CI-fix "
            f"turn{'s' if limit != 1 else ''}: no fix is queued. Look at the check, or prompt "
            "the agent yourself"
        )
        append_event(
            pr.session_id,
            "ci_fix_limit_reached",
            {"pull_request": pr.pk, "check": check.name, "commit": check.commit,
             "attempts": used, "message": message},
        )  # fmt: skip
        return f"the limit of {limit} CI-fix turns is reached: no fix is queued"
    if repository.ci_fix_policy == ASK:
        append_event(
            pr.session_id,
            "ci_fix_offered",
            {"pull_request": pr.pk, "fix": fix.pk, "check": check.name, "commit": check.commit,
             "message": f"{check.name} failed on the pull request's head: queue a turn that "
                        f"fixes it? (attempt {used + 1} of {limit})"},
        )  # fmt: skip
        return "a fix turn is offered on the session page"
    return _queue(fix, author=pr.author or pr.session.creator)


def ci_fix_policy_set(
    *, repository: Repository, policy: str | None = None, attempts: int | None = None, by=None
) -> Repository:
    """Set what a failed CI check does in `repository` (POLICIES) and how many fix turns a PR
    gets; audited. ValueError with the reason for a policy or a number that cannot be."""
    if policy is not None and policy not in POLICIES:
        raise ValueError(f"{policy!r} is not a CI-fix policy: use one of {', '.join(POLICIES)}")
    if attempts is not None and not 0 <= attempts <= MAX_ATTEMPTS:
        raise ValueError(f"attempts must be between 0 and {MAX_ATTEMPTS}, not {attempts}")
    before = {"policy": repository.ci_fix_policy, "attempts": repository.ci_fix_attempts}
    repository.ci_fix_policy = policy if policy is not None else repository.ci_fix_policy
    repository.ci_fix_attempts = attempts if attempts is not None else repository.ci_fix_attempts
    repository.save(update_fields=["ci_fix_policy", "ci_fix_attempts"])
    audit.record(
        "repository.ci_fix_policy",
        actor=by,
        repository=repository,
        object_type="repository",
        object_id=repository.pk,
        data={"before": before,
              "after": {"policy": repository.ci_fix_policy,
                        "attempts": repository.ci_fix_attempts}},
    )  # fmt: skip
    return repository


def _attempts_used(pr: PullRequest) -> int:
    return CIFix.objects.filter(pull_request=pr, state=CIFix.State.QUEUED).count()


def fix_prompt_text(pr: PullRequest, fix: CIFix, *, attempt: int) -> str:
    """The follow-up prompt: "CI failed: <check>: <summary>", the excerpt, where to see it all."""
    result = (
        CheckResult.objects.filter(pull_request=pr, commit=fix.commit, name=fix.check_name)
        .order_by("-updated_at")
        .first()
    )
    summary = (result.summary if result else "").strip() or "the check failed"
    lines = [f"CI failed: {fix.check_name}: {summary}"]
    if result and result.excerpt.strip():
        lines += ["", result.excerpt.strip()]
    link = f" ({result.url})" if result and result.url else ""
    lines += [
        "",
        f"The check ran on commit {fix.commit[:12]} of this pull request{link}. Fix what it "
        "reports and keep the rest of the change as it is. "
        f"(CI-fix attempt {attempt} of {pr.repository.ci_fix_attempts}.)",
    ]
    return "\n".join(lines)


def _queue(fix: CIFix, *, author) -> str:
    """Queue the fix turn for `fix` as the system on `author`'s behalf (who must still be
    allowed to prompt the session); records why when it cannot be."""
    pr = fix.pull_request
    attempt = _attempts_used(pr) + 1
    try:
        prompt = services.prompt_queue(
            session=pr.session, author=author, origin=Prompt.Origin.CI_FIX,
            text=fix_prompt_text(pr, fix, attempt=attempt),
        )  # fmt: skip
    except (services.SessionError, PermissionDenied) as exc:
        CIFix.objects.filter(pk=fix.pk).update(state=CIFix.State.REFUSED)
        why = str(exc)
        append_event(
            pr.session_id,
            "error",
            {"phase": "ci", "message": f"{fix.check_name} failed, but its fix turn could not "
                                       f"be queued: {why}"},
        )  # fmt: skip
        return f"the fix turn could not be queued: {why}"
    CIFix.objects.filter(pk=fix.pk).update(state=CIFix.State.QUEUED, attempt=attempt, prompt=prompt)
    audit.record(
        "ci_fix.queued",
        actor_kind=audit.AuditEntry.ActorKind.SYSTEM,
        session=pr.session,
        object_type="pull_request",
        object_id=pr.pk,
        data={"check": fix.check_name, "commit": fix.commit, "attempt": attempt,
              "prompt": prompt.order, "on_behalf_of": author.get_username()},
    )  # fmt: skip
    totals_changed([pr.session_id])
    return f"fix turn queued (prompt {prompt.order}, attempt {attempt})"


def ci_fix_queue(*, fix: CIFix, user) -> str:
    """The session page's button on an offered fix: queue it, attributed to the system on
    `user`'s behalf. PermissionDenied when `user` may not prompt the session; a line saying
    why nothing happened when the offer is gone (queued already, PR closed, limit used)."""
    pr = fix.pull_request
    access.require_repo_permission(user, pr.repository, roles.PROMPT_SESSION)
    with transaction.atomic():
        fix = CIFix.objects.select_for_update().select_related("pull_request").get(pk=fix.pk)
        if fix.state != CIFix.State.OFFERED:
            return f"this CI fix is already {fix.get_state_display()}"
        pr = PullRequest.objects.select_related("session", "repository").get(pk=pr.pk)
        if pr.state != PullRequest.State.OPEN:
            return f"the pull request is {pr.state}; there is nothing to fix"
        if _attempts_used(pr) >= pr.repository.ci_fix_attempts:
            CIFix.objects.filter(pk=fix.pk).update(state=CIFix.State.LIMIT)
            return f"this pull request has used its {pr.repository.ci_fix_attempts} CI-fix turns"
        fix.pull_request = pr
        return _queue(fix, author=user)


def _settle_fixes(pr: PullRequest, check: ReportedCheck, *, on_head: bool) -> None:
    """A completed check on the new head tells the fix turns before it how they ended."""
    if not on_head or not (check.failed or check.conclusion in PASSED):
        return
    outcome = CIFix.Outcome.RED if check.failed else CIFix.Outcome.GREEN
    settled = (
        CIFix.objects.filter(
            pull_request=pr, state=CIFix.State.QUEUED, outcome=CIFix.Outcome.PENDING,
            check_name=check.name, prompt__state=Prompt.State.DONE,
        )
        .exclude(commit=check.commit)
        .update(outcome=outcome)
    )  # fmt: skip
    if settled:
        totals_changed([pr.session_id])
