"""CI results come back to the agent, end to end against the stand-in GitHub: a PR whose CI
fails gets a fix turn (asked by the system, with the failing check's output read from GitHub)
and goes green; the attempt limit holds; a check of a commit that is not the head, or of a
commit no session pushed, queues nothing; each turn's verification is the `Inspect / verify`
check run on the head commit."""

import pytest

from integrations.github.models import WebhookDelivery
from sessions import services
from sessions.models import CheckResult, CIFix, Event, Prompt, PullRequest, Session
from sessions.runner import drive_session
from tests.integrations.github.conftest import REPO
from tests.integrations.github.github_fake import _git

# Committed: a first turn fetches the mirror on a thread of its own (its own connection).
pytestmark = pytest.mark.django_db(transaction=True)

# The agent: a first turn adds a greeting; a turn asked to fix CI writes the fix.
AGENT = (
    'case "$INSPECT_PROMPT" in "CI failed"*) printf "fixed\\n" >> fix.txt;; '
    '*) printf "hello\\n" > greeting.txt; printf "%s\\n" "$INSPECT_PROMPT" >> asked.txt;; esac'
)
LOG = (
    "collected 12 items\n"
    + "tests/test_widgets.py .........\n" * 3
    + ("FAILED tests/test_widgets.py::test_greeting - AssertionError: 'hello' != 'hi'\n")
)
ANNOTATION = {"path": "tests/test_widgets.py", "start_line": 7, "end_line": 7,
              "annotation_level": "failure", "message": "assert 'hello' == 'hi'"}  # fmt: skip


def start(create_session) -> PullRequest:
    code, summary, err = create_session("--prompt", "add a greeting", "--agent-command", AGENT,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, err
    assert summary["state"] == "pr_open"
    return PullRequest.objects.get(session_id=summary["id"])


def ci_finishes(github, deliver, sha: str, conclusion: str, **options) -> list[dict]:
    """CI finishes on `sha` on the stand-in, which sends its webhooks here; their answers."""
    answers = []
    for event, payload in github.finish_ci(REPO, sha, conclusion=conclusion, **options):
        answer = deliver(event, payload)
        assert answer.status_code in (200, 202), answer.json()
        answers.append(answer.json())
    return answers


def test_a_pr_whose_ci_fails_gets_a_fix_turn_and_goes_green(
    github, create_session, deliver, client, team
):
    pr = start(create_session)
    first_head = pr.head_sha
    [verify] = github.runs_on(REPO, first_head, "Inspect / verify")
    assert (verify["status"], verify["conclusion"]) == ("completed", "success")

    answers = ci_finishes(github, deliver, first_head, "failure", summary="1 failed, 11 passed",
                          text=LOG, annotations=(ANNOTATION,))  # fmt: skip
    outcomes = [a["outcome"] for a in answers]
    assert outcomes[0] == f"test on {first_head[:12]} is in_progress"
    assert outcomes[1].endswith("failed: fix turn queued (prompt 2, attempt 1)")
    assert "already decided a CI fix for this commit" in outcomes[2]  # the check suite

    fix = Prompt.objects.get(session=pr.session, order=2)
    assert fix.origin == "ci_fix" and fix.author == pr.author
    assert fix.text.startswith("CI failed: test: test failure\n1 failed, 11 passed\n")
    assert "tests/test_widgets.py:7: failure: assert 'hello' == 'hi'" in fix.text
    assert "AssertionError: 'hello' != 'hi'" in fix.text
    assert f"commit {first_head[:12]}" in fix.text and "attempt 1 of 2" in fix.text
    [queued] = Event.objects.filter(session=pr.session, kind="prompt", payload__order=2)
    assert queued.payload["origin"] == "ci_fix"
    [failed] = Event.objects.filter(
        session=pr.session, kind="check_result", payload__source="check_run"
    )
    assert failed.payload["conclusion"] == "failure" and failed.payload["on_head"] is True
    # The output was read from GitHub with a token that may only read and write checks.
    reads = github.calls("GET", rf"/repos/{REPO}/check-runs/\d+")
    assert reads and {github.tokens[r["token"]].permissions["checks"] for r in reads} == {"write"}
    assert all(len(github.tokens[r["token"]].permissions) == 1 for r in reads)

    assert drive_session(pr.session_id) == "idle"
    pr.refresh_from_db()
    assert pr.head_sha != first_head
    bare = github.repo(REPO).path
    assert _git(bare, "show", f"{pr.branch}:fix.txt") == "fixed"
    assert _git(bare, "show", f"{pr.branch}:greeting.txt") == "hello"
    assert Session.objects.get(pk=pr.session_id).state == "pr_open"
    # The fix turn's verification is a check on the new head too.
    assert github.runs_on(REPO, pr.head_sha, "Inspect / verify")[0]["conclusion"] == "success"

    answers = ci_finishes(github, deliver, pr.head_sha, "success", summary="12 passed")
    assert answers[1]["outcome"] == f"test on {pr.head_sha[:12]}: success"
    fix_row = CIFix.objects.get(pull_request=pr)
    assert (fix_row.state, fix_row.attempt, fix_row.outcome) == ("queued", 1, "green")
    assert Prompt.objects.filter(session=pr.session).count() == 2
    # The Metrics page counts the CI-fix turn and that it ended green.
    client.force_login(team.manager)
    page = client.get("/metrics/", {"repository": "widgets"}).content.decode()
    assert "1 ended green (100.0%)" in page
    assert github.problems == []


def test_the_attempt_limit_is_respected(github, create_session, deliver, team):
    team.repository.ci_fix_attempts = 1
    team.repository.save()
    pr = start(create_session)
    ci_finishes(github, deliver, pr.head_sha, "failure", summary="1 failed", text=LOG)
    assert drive_session(pr.session_id) == "idle"
    pr.refresh_from_db()

    answers = ci_finishes(github, deliver, pr.head_sha, "failure", summary="still 1 failed")
    assert "the limit of 1 CI-fix turns is reached" in answers[1]["outcome"]
    assert Prompt.objects.filter(session=pr.session).count() == 2  # the first fix only
    [limit] = Event.objects.filter(session=pr.session, kind="ci_fix_limit_reached")
    assert limit.payload["attempts"] == 1 and limit.payload["commit"] == pr.head_sha
    first = CIFix.objects.get(pull_request=pr, state="queued")
    assert first.outcome == "red"  # its check failed again on the fix's commit
    assert github.problems == []


def test_a_check_of_another_commit_queues_nothing(github, create_session, deliver):
    pr = start(create_session)
    old_head = pr.head_sha
    services.prompt_queue(session=pr.session, author=pr.author, text="and say hi")
    assert drive_session(pr.session_id) == "idle"
    pr.refresh_from_db()
    assert pr.head_sha != old_head

    answers = ci_finishes(github, deliver, old_head, "failure", summary="1 failed", text=LOG)
    assert "not the pull request's head" in answers[1]["outcome"]
    # A commit no session pushed (the base branch's): ignored, with the reason.
    base = _git(github.repo(REPO).path, "rev-parse", "main")
    ignored = ci_finishes(github, deliver, base, "failure", summary="broken main")
    assert all(a["outcome"].startswith("ignored: no session's pull request") for a in ignored)

    assert Prompt.objects.filter(session=pr.session).count() == 2
    assert not CIFix.objects.exists()
    result = CheckResult.objects.get(commit=old_head, source="check_run")
    assert result.on_head is False and "not the pull request's head" in result.note
    delivery = WebhookDelivery.objects.filter(event="check_run", action="completed").get()
    assert "not the pull request's head" in delivery.outcome
    assert github.problems == []


def test_a_long_log_is_cut_to_an_excerpt_with_a_link(github, create_session, deliver):
    pr = start(create_session)
    long_log = "".join(f"line {n}: noise\n" for n in range(3_500)) + LOG  # GitHub keeps 65,535
    ci_finishes(github, deliver, pr.head_sha, "failure", summary="1 failed", text=long_log)
    fix = Prompt.objects.get(session=pr.session, order=2)
    assert len(fix.text) < 8_000
    assert "characters omitted" in fix.text and "AssertionError: 'hello' != 'hi'" in fix.text
    [run] = github.runs_on(REPO, pr.head_sha, "test")
    assert f"all of it: {run['html_url']}" in fix.text
    assert github.problems == []


def test_the_verify_check_tells_a_reviewer_what_ran(github, create_session):
    pr = start(create_session)
    [run] = github.runs_on(REPO, pr.head_sha, "Inspect / verify")
    output = run["output"]
    assert output["title"] == "Verification passed: 1 of 1 commands passed"
    summary = output["summary"]
    assert f"after turn 1 of [session {pr.session_id}]" in summary
    assert "| ✅ | `echo checked` | 0 |" in summary
    snapshot = pr.session.snapshot
    assert f"Ran on snapshot {snapshot.pk} of widgets at `{snapshot.commit[:12]}`" in summary
    assert "Screenshots: 0." in summary
    assert "### `echo checked` — exit 0," in output["text"] and "checked" in output["text"]
    assert run["external_id"] == f"inspect-session-{pr.session_id}"
    assert run["details_url"].endswith(f"/sessions/{pr.session_id}/")
    [published] = Event.objects.filter(session=pr.session, kind="check_published")
    assert published.payload["conclusion"] == "success" and published.payload["turn"] == 1
    assert published.payload["url"] == run["html_url"]
    created = github.calls("POST", f"/repos/{REPO}/check-runs")
    assert len(created) == 1 and github.tokens[created[0]["token"]].permissions == {
        "checks": "write"
    }
    assert github.problems == []


def test_ci_that_reports_before_the_push_is_recorded_still_finds_the_head(
    github, create_session, deliver
):
    pr = start(create_session)
    pushed = pr.head_sha
    # The push reached GitHub and its CI finished before publishing recorded the new head.
    PullRequest.objects.filter(pk=pr.pk).update(head_sha=_git(github.repo(REPO).path,
                                                               "rev-parse", "main"))  # fmt: skip
    answers = ci_finishes(github, deliver, pushed, "failure", summary="1 failed", text=LOG)
    assert answers[1]["outcome"].endswith("failed: fix turn queued (prompt 2, attempt 1)")
    assert github.problems == []
