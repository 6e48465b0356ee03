"""What lands in the audit log: logins, membership changes, agent tool calls and commands."""

from __future__ import annotations

from django.test import Client

from accounts.models import Membership, Role
from approvals.models import AuditEntry
from sessions.events import append_events


def test_a_login_and_a_failed_login_are_recorded(team):
    client = Client()
    assert client.login(username="reviewer", password="correct horse battery staple")
    assert not Client().login(username="reviewer", password="wrong")
    login = AuditEntry.objects.get(action="account.login")
    assert login.actor_name == "reviewer"
    failed = AuditEntry.objects.get(action="account.login_failed")
    assert failed.data["username"] == "reviewer" and "wrong" not in str(failed.data)


def test_membership_and_role_changes_are_recorded(team):
    membership = Membership.objects.get(user=team.manager, repository=team.repository)
    membership.role = Role.REVIEWER
    membership.save()
    membership.delete()
    actions = list(
        AuditEntry.objects.filter(action__startswith="membership.", data__user="manager")
        .order_by("seq")
        .values_list("action", "data__role")
    )
    assert actions[-2:] == [("membership.role", "reviewer"), ("membership.remove", "reviewer")]


def test_agent_tool_calls_and_sandbox_commands_are_recorded(
    agent_session, django_capture_on_commit_callbacks
):
    # Recorded after the events commit, so a slow audit write never holds the event log.
    with django_capture_on_commit_callbacks(execute=True):
        append_events(
            agent_session.pk,
            [
                ("tool_call", {"name": "run_command", "arguments": {"command": "ls"}, "turn": 1}),
                ("output", {"stream": "stdout", "text": "README.md"}),
                ("command", {"command": "pytest -q", "phase": "verify", "exit_code": 0, "turn": 1}),
            ],
        )
    entries = AuditEntry.objects.filter(session_id=agent_session.pk).order_by("seq")
    assert [(e.action, e.actor_kind) for e in entries] == [
        ("agent.tool_call", "agent"),
        ("sandbox.command", "system"),
    ]
    assert entries[0].data["arguments"] == {"command": "ls"} and entries[0].data["seq"] == 1
    assert entries[1].data["command"] == "pytest -q" and entries[1].data["seq"] == 3


def test_changes_made_while_acting_as_a_user_name_that_user(team):
    from approvals.audit import acting_as

    with acting_as(team.admin):
        Membership.objects.filter(user=team.manager).first().delete()
    entry = AuditEntry.objects.get(action="membership.remove")
    assert (entry.actor_name, entry.actor_kind) == ("admin", "user")


def test_each_turn_records_its_file_change_summary(ready_repo, create_session):
    code, summary, err = create_session(
        "--prompt", "add notes", "--agent-command", "echo hi > NOTES.md", "--inline",
        "--as", "engineer",
    )  # fmt: skip
    assert code == 0, err
    entry = AuditEntry.objects.get(action="session.changes")
    assert entry.session_id == summary["id"] and entry.actor_kind == "agent"
    assert entry.data["turn"] == 1 and entry.data["prompt_author"] == "engineer"
    assert entry.data["paths"] == ["NOTES.md"] and entry.data["added"] == 1
    assert len(entry.data["commit"]) == 40 and entry.data["ended"] == "idle"
