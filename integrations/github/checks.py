"""GitHub's CI results (`check_run`, `check_suite`, `status` webhooks) about a session's pull
request, recorded through sessions/ci_fixes.py, which decides the fix turn. A failed check's
summary and output excerpt are read from GitHub with an installation token that may only read
and write checks (GitHubHost.check_run_output); a log longer than the excerpt keeps its head and
tail and links the whole.

Ignored (202, with the reason): our own `Inspect / verify` check (the turn already knows its
verification), actions other than a result, and checks of commits no session's PR holds.
"""

from __future__ import annotations

from inspect_web.text import cut
from integrations.github import app_settings
from integrations.github.codehost import GitHubHost
from integrations.github.delivery import Ignored
from integrations.github.models import GitHubLink
from sessions.ci_fixes import FAILED, ReportedCheck, record_check
from sessions.models import CheckResult, PullRequest
from sessions.verify_check import VERIFY_CHECK

EXCERPT_HEAD, EXCERPT_TAIL = 1_500, 4_500  # characters of a failed check's log kept


def excerpt_of(text: str, annotations: list[str], url: str) -> str:
    """A failed check's annotations and its output's head and tail, with a link to the whole
    when it was cut."""
    parts = []
    if annotations:
        parts.append("\n".join(annotations))
    if text.strip():
        kept = cut(text.strip(), EXCERPT_HEAD, EXCERPT_TAIL)
        parts.append(kept.joined())
        if kept.omitted:
            parts.append(f"(the log is {len(text):,} characters; all of it: {url or 'on GitHub'})")
    return "\n\n".join(parts)


def _summary(title: str, summary: str) -> str:
    return "\n".join(part.strip() for part in (title, summary) if part and part.strip())


def _pull_request(link: GitHubLink, *, numbers: list, sha: str, branches: list[str]):
    """The session's PR a check concerns: by the PR numbers GitHub lists, else by its head
    commit, else by its branch (a check of an older commit still names the branch)."""
    prs = PullRequest.objects.select_related("session", "repository").filter(
        repository=link.repository, host=PullRequest.Host.GITHUB
    )
    for number in numbers:
        pr = prs.filter(number=number).first()
        if pr is not None:
            return pr
    pr = (sha and prs.filter(head_sha=sha).first()) or (
        branches and prs.filter(branch__in=branches).order_by("-created_at").first()
    )
    if not pr:
        raise Ignored(
            f"no session's pull request in {link.full_name} holds commit {sha[:12] or '?'}"
        )
    return pr


def _numbers(pulls: list) -> list:
    return [p.get("number") for p in pulls or [] if isinstance(p, dict) and p.get("number")]


def _ours(app: dict | None, name: str) -> bool:
    slug = (app or {}).get("slug")
    return name == VERIFY_CHECK or bool(slug and slug == app_settings.app_slug())


# -- check_run --------------------------------------------------------------------------------
def on_check_run(link: GitHubLink, payload: dict) -> str:
    action = payload.get("action")
    if action not in {"created", "completed", "rerequested"}:
        raise Ignored(f"check_run action {action!r} is not used here")
    run = payload.get("check_run") or {}
    name = str(run.get("name") or "check run")
    if _ours(run.get("app"), name):
        raise Ignored(f"{name} is this App's own check")
    suite = run.get("check_suite") or {}
    sha = str(run.get("head_sha") or suite.get("head_sha") or "")
    pr = _pull_request(
        link, numbers=_numbers(run.get("pull_requests") or suite.get("pull_requests")), sha=sha,
        branches=[suite["head_branch"]] if suite.get("head_branch") else [],
    )  # fmt: skip
    output = run.get("output") or {}
    url = str(run.get("html_url") or run.get("details_url") or "")
    check = ReportedCheck(
        key=f"github-check-run-{run.get('id')}", source=CheckResult.Source.CHECK_RUN,
        name=name, commit=sha, status=str(run.get("status") or ""),
        conclusion=str(run.get("conclusion") or ""),
        summary=_summary(output.get("title") or "", output.get("summary") or ""),
        excerpt=excerpt_of(output.get("text") or "", [], url), url=url,
    )  # fmt: skip
    host = GitHubHost(link.repository)
    run_id = run.get("id")

    def details(check: ReportedCheck) -> tuple[str, str]:
        full = host.check_run_output(int(run_id))
        return _summary(full.title, full.summary), excerpt_of(full.text, full.annotations, url)

    return record_check(pr, check, details=details if isinstance(run_id, int) else None)


# -- check_suite ------------------------------------------------------------------------------
def on_check_suite(link: GitHubLink, payload: dict) -> str:
    """A suite's result: its own row (its app's name), and for a failed suite the failing runs'
    output; its runs' own check_run deliveries decide the same commit at most once."""
    action = payload.get("action")
    if action != "completed":
        raise Ignored(f"check_suite action {action!r} is not used here")
    suite = payload.get("check_suite") or {}
    app = suite.get("app") or {}
    name = str(app.get("name") or "check suite")
    if _ours(app, name):
        raise Ignored(f"the check suite of {name}, this App")
    sha = str(suite.get("head_sha") or "")
    pr = _pull_request(
        link, numbers=_numbers(suite.get("pull_requests")), sha=sha,
        branches=[suite["head_branch"]] if suite.get("head_branch") else [],
    )  # fmt: skip
    check = ReportedCheck(
        key=f"github-check-suite-{suite.get('id')}", source=CheckResult.Source.CHECK_SUITE,
        name=name, commit=sha, status=str(suite.get("status") or "completed"),
        conclusion=str(suite.get("conclusion") or ""),
        summary=f"the {name} check suite concluded {suite.get('conclusion')}",
    )  # fmt: skip
    host = GitHubHost(link.repository)

    def details(check: ReportedCheck) -> tuple[str, str]:
        failing = [
            (run_id, run_name)
            for run_id, run_name, conclusion, suite_id in host.check_runs_of(sha)
            if suite_id == suite.get("id") and conclusion in FAILED
        ]
        if not failing:
            return check.summary, ""
        full = host.check_run_output(failing[0][0])
        summary = (
            ", ".join(n for _, n in failing) + " failed: " + _summary(full.title, full.summary)
        )
        return summary, excerpt_of(full.text, full.annotations, full.url)

    return record_check(pr, check, details=details)


# -- status -----------------------------------------------------------------------------------
def on_status(link: GitHubLink, payload: dict) -> str:
    """A commit status (a CI that reports statuses, not checks): one row per commit and
    context; its description is the summary, its target URL the log."""
    state = str(payload.get("state") or "")
    context = str(payload.get("context") or "default")
    sha = str(payload.get("sha") or "")
    if state not in {"pending", "success", "failure", "error"}:
        raise Ignored(f"a status in state {state!r}")
    branches = [b.get("name", "") for b in payload.get("branches") or [] if isinstance(b, dict)]
    pr = _pull_request(link, numbers=[], sha=sha, branches=[b for b in branches if b])
    completed = state != "pending"
    check = ReportedCheck(
        key=f"github-status-{sha}-{context}"[:200], source=CheckResult.Source.STATUS,
        name=context, commit=sha, status="completed" if completed else "in_progress",
        conclusion=state if completed else "", summary=str(payload.get("description") or ""),
        url=str(payload.get("target_url") or ""),
    )  # fmt: skip
    return record_check(pr, check)
