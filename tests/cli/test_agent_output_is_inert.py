"""Agent output carrying terminal escape sequences reaches `inspect watch` (and `manage.py
inspect session events`) inert: the escapes
are stored as the agent wrote them but printed visibly (^[), so they cannot retitle the window,
clear the screen or overwrite lines in the reader's terminal."""

from __future__ import annotations

import pytest

from inspect_web.cli import Terminal, describe
from sessions.events import append_events
from sessions.models import Event, Session

pytestmark = pytest.mark.django_db(transaction=True)

# A setup command whose output retitles the terminal.
BUILD_RECIPE = "setup = [\"printf 'built\\\\033]0;pwned\\\\007\\\\n'\"]\n"
HOSTILE = r"printf 'title\033]0;pwned\007 clear\033[2J red\033[31mX\rfake\n'"


def test_escape_sequences_in_agent_output_are_printed_inert(logged_in, ready_repo, start_celery):
    start_celery("worker")
    result = logged_in("run", "widgets", "be hostile", "--watch", "--agent-command", HOSTILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\r" not in result.stdout
    assert "title^[]0;pwned^G clear^[[2J red^[[31mX^Mfake" in result.stdout
    payloads = Event.objects.filter(kind="output").values_list("payload", flat=True)
    stored = [p.get("text") or p.get("line") or "" for p in payloads]
    assert any("\x1b]0;pwned\x07" in text for text in stored)  # kept verbatim; shown inert


ESCAPING = "done\x1b]0;pwned\x07\x1b[2J\rfake"


def test_both_clients_print_an_events_escape_sequences_inert(team, inspect_cli):
    """The REST client (`inspect watch`) and `manage.py inspect session events` print event
    text through the one helper (inspect_web.text.inert)."""
    line = describe({"seq": 3, "kind": "output", "payload": {"text": ESCAPING}}, Terminal())
    assert "\x1b" not in line and "\x07" not in line and "\r" not in line
    assert "done^[]0;pwned^G^[[2J^Mfake" in line

    session = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="hostile", branch="b"
    )
    append_events(session.pk, [("output", {"stream": "stdout", "text": ESCAPING})])
    code, out, err = inspect_cli("session", "events", str(session.pk), "--as", "engineer")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "done^[]0;pwned^G^[[2J^Mfake" in out


def test_a_build_log_is_printed_inert(team, inspect_cli, make_git_repo):
    """`inspect snapshot refresh` echoes the repository's own setup output: an escape sequence
    in it reaches the terminal made visible, not executed."""
    upstream = make_git_repo(
        files={
            "README.md": "# widgets\n",
            ".inspect/environment.toml": BUILD_RECIPE,
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, out, err = inspect_cli("snapshot", "refresh", "widgets")
    assert code == 0, err
    assert "built" in out
    assert "\x1b" not in out and "\x07" not in out
