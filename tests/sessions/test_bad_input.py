import pytest

from sessions.models import Event, Prompt, Session

pytestmark = pytest.mark.django_db

CMD = ["--agent-command", "true"]


def test_an_empty_prompt_is_refused_and_nothing_is_created(ready_repo, create_session):
    code, _, err = create_session("--prompt", "   ", *CMD)
    assert code == 1
    assert "the prompt is empty" in err
    assert not Session.objects.exists()


def test_an_oversized_prompt_is_refused(ready_repo, create_session):
    code, _, err = create_session("--prompt", "x" * 100_001, *CMD)
    assert code == 1
    assert "the prompt is 100,001 bytes; the limit is 100,000" in err
    assert not Session.objects.exists()


def test_an_unknown_agent_is_refused_naming_the_available_ones(ready_repo, create_session):
    code, _, err = create_session("--prompt", "fix it", "--agent", "hal9000")
    assert code == 1
    assert "unknown agent 'hal9000'; available: command" in err
    assert not Session.objects.exists()


def test_a_role_that_may_not_start_sessions_is_refused(ready_repo, create_session):
    code, _, err = create_session("--prompt", "fix it", "--as", "manager", *CMD)
    assert code == 1
    assert "Your role on widgets does not allow this" in err


def test_a_prompt_to_a_foreign_session_is_refused(ready_repo, create_session, inspect_cli):
    _, created, _ = create_session("--prompt", "fix it", "--as", "engineer", *CMD)
    before = Event.objects.count()
    code, _, err = inspect_cli("session", "prompt", str(created["id"]), "more", "--as", "outsider")
    assert code == 1
    assert f"no session {created['id']} on a repository outsider is a member of" in err
    assert Event.objects.count() == before
    assert Prompt.objects.count() == 1


def test_a_prompt_to_a_finished_session_is_refused(ready_repo, create_session, inspect_cli):
    _, created, _ = create_session("--prompt", "fix it", *CMD)
    Session.objects.filter(pk=created["id"]).update(state="merged")
    code, _, err = inspect_cli("session", "prompt", str(created["id"]), "more")
    assert code == 1
    assert f"session {created['id']} is merged; start a new session instead" in err
    assert Prompt.objects.count() == 1


def test_events_after_a_negative_seq_is_refused(ready_repo, create_session, inspect_cli):
    _, created, _ = create_session("--prompt", "fix it", *CMD)
    code, _, err = inspect_cli("session", "events", str(created["id"]), "--after", "-1")
    assert code == 1
    assert "--after must be 0 or a positive seq" in err


def test_an_oversized_follow_up_is_refused_and_nothing_changes(
    ready_repo, create_session, inspect_cli, client, team
):
    _, created, _ = create_session("--prompt", "fix it", *CMD, "--inline")
    before = Event.objects.filter(session_id=created["id"]).count()
    code, _, err = inspect_cli("session", "prompt", str(created["id"]), "é" * 50_001)
    assert code == 1
    assert "the prompt is 100,002 bytes; the limit is 100,000" in err

    client.force_login(team.engineer)
    page = client.post(f"/sessions/{created['id']}/prompts/", {"text": "x" * 100_001}, follow=True)
    assert "the prompt is 100,001 bytes; the limit is 100,000" in page.content.decode()
    assert Prompt.objects.filter(session_id=created["id"]).count() == 1
    assert Event.objects.filter(session_id=created["id"]).count() == before
    assert Session.objects.get(pk=created["id"]).state == "idle"
