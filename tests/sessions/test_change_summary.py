"""What a reviewer is told before reading a diff: areas, tests, and the files that need care."""

import pytest

from sessions.change_summary import change_summary, summary_markdown


def files(*paths: str) -> list[dict]:
    return [{"path": p, "added": 3, "removed": 1} for p in paths]


def test_a_source_change_without_tests_is_flagged_and_areas_are_counted():
    summary = change_summary(files("app/models.py", "app/views.py", "README.md"))
    assert (summary.files, summary.added, summary.removed) == (3, 9, 3)
    assert summary.areas == [("app/", 2), ("(root)", 1)]
    assert summary.tests == [] and summary.notes == ["No test was added or changed."]


def test_tests_migrations_dependencies_recipe_and_ci_are_each_named():
    summary = change_summary(
        files(
            "app/models.py",
            "tests/test_models.py",
            "web/src/button.test.tsx",
            "app/migrations/0007_add_owner.py",
            "requirements-dev.txt",
            "web/package.json",
            ".inspect/environment.toml",
            ".github/workflows/ci.yml",
        )
    )
    assert summary.tests == ["tests/test_models.py", "web/src/button.test.tsx"]
    assert summary.migrations == ["app/migrations/0007_add_owner.py"]
    assert summary.dependencies == ["requirements-dev.txt", "web/package.json"]
    assert summary.recipe == [".inspect/environment.toml"]
    assert summary.ci == [".github/workflows/ci.yml"]
    assert "No test was added or changed." not in summary.notes
    body = summary_markdown(summary)
    assert body.startswith("## Risk\n")
    assert "- Migrations: `app/migrations/0007_add_owner.py`" in body
    assert "- Sandbox recipe: `.inspect/environment.toml`" in body
    assert "⚠️ Dependencies changed" in body


def test_no_change_gives_no_risk_section():
    assert change_summary([]).empty and summary_markdown(change_summary([])) == ""


@pytest.mark.django_db
def test_a_long_sessions_pull_request_body_says_what_each_turn_did(team):
    from sessions.events import append_events
    from sessions.models import Prompt, Session
    from sessions.pulls import pr_body

    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="t", branch="main"
    )
    asks = ["add a login page", "use the company font", "fix the failing test"]
    for order, text in enumerate(asks, start=1):
        Prompt.objects.create(session=session, author=team.engineer, order=order, text=text)
    for turn, (said, ok) in enumerate(
        [("Added /login.", True), ("Font set.", True), ("Fixed.", False)], start=1
    ):
        append_events(
            session.pk,
            [
                ("agent_message", {"text": said}),
                (
                    "command",
                    {
                        "phase": "verify",
                        "turn": turn,
                        "ok": ok,
                        "command": "make test",
                        "exit_code": 0 if ok else 1,
                        "duration_ms": 5,
                    },
                ),  # fmt: skip
                ("turn_finished", {"turn": turn, "timings": {}}),
            ],
        )
    body = pr_body(session)
    assert body.startswith("## What changed and why\n\nFixed.\n\nAsked for: add a login page\n")
    turns = body[body.index("## Turns\n") :]
    assert "1. add a login page ✅ — Added /login." in turns
    assert "3. fix the failing test ❌ — Fixed." in turns
