"""Sessions through the API: the services' rules, the pages' membership rules."""

import pytest

from sessions.events import append_event
from sessions.models import Prompt, Session

pytestmark = pytest.mark.django_db

NEW = {"repository": "widgets", "prompt": "Fix the flaky test", "agent_command": "echo hi"}


def test_an_engineer_starts_a_session_and_reads_it_back(team, api):
    client = api(team.engineer)
    response = client.post("/api/sessions/", NEW, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    session = Session.objects.get(pk=body["id"])
    assert session.creator == team.engineer and session.agent == "command"
    assert body["url"] == f"http://testserver/sessions/{session.pk}/"
    assert body["prompts"][0]["text"] == "Fix the flaky test"
    assert body["busy"] is True and body["verification"]["passed"] is None

    shown = client.get(f"/api/sessions/{session.pk}/").json()
    assert shown["state"] == "queued" and shown["repository"] == "widgets"
    listed = client.get("/api/sessions/", {"repository": "widgets"}).json()
    assert [s["id"] for s in listed] == [session.pk]


def test_a_non_member_gets_404_and_a_reviewer_403_with_the_reason(team, api):
    outsider = api(team.outsider).post("/api/sessions/", NEW, format="json")
    assert outsider.status_code == 404
    reviewer = api(team.reviewer).post("/api/sessions/", NEW, format="json")
    assert reviewer.status_code == 403
    assert "Your role on widgets does not allow this" in reviewer.json()["detail"]
    assert not Session.objects.exists()

    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    assert api(team.outsider).get(f"/api/sessions/{session.pk}/").status_code == 404
    assert api(team.outsider).get("/api/sessions/").json() == []
    stop = api(team.reviewer).post(f"/api/sessions/{session.pk}/stop/")
    assert stop.status_code == 403


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({**NEW, "prompt": "   "}, "the prompt is empty"),
        ({**NEW, "agent": "nonsense"}, "agent:"),
        ({"prompt": "x"}, "repository: This field is required."),
        ({**NEW, "prompt": "a\x00b"}, "Null characters are not allowed."),
    ],
)
def test_bad_input_is_a_400_that_says_what_to_change(team, api, body, says):
    response = api(team.engineer).post("/api/sessions/", body, format="json")
    assert response.status_code == 400
    assert says in response.json()["detail"]


def test_malformed_json_is_a_400(team, api):
    response = api(team.engineer).post(
        "/api/sessions/", "{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


def test_a_follow_up_prompt_and_a_stop_go_through_the_services(team, api):
    client = api(team.engineer)
    created = client.post("/api/sessions/", NEW, format="json").json()
    response = client.post(f"/api/sessions/{created['id']}/prompts/", {"text": "and the docs"})
    assert response.status_code == 201
    assert response.json()["order"] == 2 and response.json()["author"] == "engineer"
    assert Prompt.objects.filter(session_id=created["id"]).count() == 2
    assert client.post(f"/api/sessions/{created['id']}/stop/").json() == {"stopping": True}

    Session.objects.filter(pk=created["id"]).update(state="cancelled")
    refused = client.post(f"/api/sessions/{created['id']}/prompts/", {"text": "more"})
    assert refused.status_code == 400
    assert "start a new session instead" in refused.json()["detail"]


def test_events_after_a_seq_and_the_newest_diff(team, api):
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    append_event(session.pk, "output", {"line": "one"})
    append_event(session.pk, "diff", {"path": "a.py", "added": 1, "removed": 0, "binary": False,
                                       "patch": "+x\n", "turn": 1, "commit": "c1"})  # fmt: skip
    append_event(session.pk, "diff", {"path": "a.py", "added": 2, "removed": 1, "binary": False,
                                       "patch": "+y\n", "turn": 2, "commit": "c2"})  # fmt: skip
    client = api(team.engineer)
    page = client.get(f"/api/sessions/{session.pk}/events/", {"after": 1}).json()
    assert page["last_seq"] == 3
    assert [e["seq"] for e in page["events"]] == [2, 3]
    assert client.get(f"/api/sessions/{session.pk}/events/", {"after": -1}).status_code == 400
    diff = client.get(f"/api/sessions/{session.pk}/diff/").json()
    assert diff["turn"] == 2 and diff["commit"] == "c2"
    assert [(f["path"], f["added"]) for f in diff["files"]] == [("a.py", 2)]
