"""The `Inspect / verify` check a turn's verification becomes: failure when a verify command
failed (with its exit code, duration and output tail), neutral when none ran or when hand edits
came after it; a local repository publishes none."""

import pytest

from sessions.events import append_event
from sessions.models import Event, Prompt, PullRequest, Session
from sessions.verify_check import publish_verification, verification_report

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(team):
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    Prompt.objects.create(session=session, author=team.engineer, text="t", order=1, state="done")
    return session


def command(session, turn: int, text: str, *, ok: bool, exit_code: int | None, output: str):
    append_event(session.pk, "command", {
        "command": text, "phase": "verify", "exit_code": exit_code, "ok": ok,
        "duration_ms": 2500.0, "limit_hit": None, "turn": turn, "output_head": output,
    })  # fmt: skip


def test_a_failed_command_fails_the_check_and_shows_its_output_tail(session):
    command(session, 1, "ruff check .", ok=True, exit_code=0, output="All checks passed!")
    long_output = "".join(f"test {n} ok\n" for n in range(500)) + "FAILED test_widgets - boom\n"
    command(session, 1, "pytest -q", ok=False, exit_code=1, output=long_output)
    append_event(session.pk, "screenshot", {"label": "after", "turn": 1})
    report = verification_report(session, head="f" * 40, turn=1)
    assert report.conclusion == "failure"
    assert report.title == "Verification failed: 1 of 2 commands passed"
    assert "| ✅ | `ruff check .` | 0 | 2.5 s |" in report.summary
    assert "| ❌ | `pytest -q` | 1 | 2.5 s |" in report.summary
    assert "Screenshots: 1 ([on the session page]" in report.summary
    assert "### `pytest -q` — exit 1, 2.5 s" in report.text
    assert "FAILED test_widgets - boom" in report.text and "characters before" in report.text
    assert "test 0 ok" not in report.text  # only the tail


def test_no_verification_or_hand_edits_are_neutral(session):
    assert verification_report(session, head="f" * 40, turn=1).conclusion == "neutral"
    command(session, 1, "pytest -q", ok=True, exit_code=0, output="ok")
    by_hand = verification_report(session, head="f" * 40, turn=1, by_hand=True)
    assert by_hand.conclusion == "neutral" and "changed by hand in the terminal" in by_hand.summary


def test_a_local_repository_publishes_no_check(session, team):
    pr = PullRequest.objects.create(session=session, repository=team.repository, branch="b",
                                    base="main", title="t")  # fmt: skip
    publish_verification(session, pr, head="f" * 40)
    assert not Event.objects.filter(session=session, kind__in=["check_published", "error"])
