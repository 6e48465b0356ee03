import pytest
from django.urls import reverse

from sessions.event_kinds import KINDS
from sessions.events import append_events
from sessions.models import Event, Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(team):
    return Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Fix login", branch="main"
    )


def test_agent_output_with_html_is_shown_as_text(client, team, session):
    append_events(session.pk, [("agent_message", {"text": "<script>alert('x')</script>"})])
    client.force_login(team.reviewer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page


def test_the_diff_view_lists_files_with_counts_and_highlights(client, team, session):
    patch = "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-old\n+new\n"
    append_events(
        session.pk,
        [
            ("diff", {"path": "app.py", "added": 1, "removed": 1, "patch": patch, "turn": 1}),
            ("diff", {"path": "logo.png", "added": 0, "removed": 0, "binary": True, "turn": 1}),
        ],
    )
    client.force_login(team.engineer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert "<code>app.py</code>" in page and "+1" in page and "−1" in page
    assert '<tr class="add" data-new="1">' in page  # the added line is marked
    assert "Binary file changed." in page


def test_a_huge_diff_is_collapsed_and_does_not_stall_the_page(client, team, session):
    lines = "".join(f"+line {i}\n" for i in range(200_000))
    patch = "diff --git a/big.txt b/big.txt\n@@ -0,0 +1,200000 @@\n" + lines
    append_events(
        session.pk,
        [("diff", {"path": "big.txt", "added": 200_000, "removed": 0, "patch": patch, "turn": 1})],
    )
    client.force_login(team.engineer)
    response = client.get(session.get_absolute_url())
    assert response.status_code == 200
    assert "collapsed" in response.content.decode()
    assert "The patch was cut here" in response.content.decode()  # the log kept its head
    assert len(response.content) < 2_000_000  # the stored patch is capped; the page stays small


def test_the_page_renders_the_newest_events_and_loads_older_on_scroll(client, team, session):
    append_events(
        session.pk, [("output", {"stream": "stdout", "text": f"line {i}"}) for i in range(1, 1001)]
    )
    client.force_login(team.engineer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert 'data-seq="1000"' in page and 'data-seq="701"' in page
    assert 'data-seq="700"' not in page
    older = client.get(
        reverse("sessions:older", args=[session.pk]) + "?before=701"
    ).content.decode()
    assert 'data-seq="700"' in older and 'data-seq="401"' in older and 'data-seq="400"' not in older
    # The next page's address is the older-events view itself, not the session page.
    assert f'hx-get="{reverse("sessions:older", args=[session.pk])}?before=401"' in older
    assert client.get(reverse("sessions:older", args=[session.pk]) + "?before=x").status_code == 400


def test_verification_results_show_pass_and_fail(client, team, session):
    append_events(
        session.pk,
        [
            ("command", {"command": "pytest -q", "phase": "verify", "exit_code": 0, "ok": True,
                         "duration_ms": 812.0, "turn": 1, "output_head": "3 passed"}),
            ("command", {"command": "ruff check .", "phase": "verify", "exit_code": 1, "ok": False,
                         "duration_ms": 40.0, "turn": 1, "output_head": "E501"}),
        ],
    )  # fmt: skip
    client.force_login(team.engineer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert "✔ pass <code>pytest -q</code>" in page
    assert "✘ fail <code>ruff check .</code>" in page


def test_the_prompt_form_refuses_an_empty_prompt_with_a_message(client, team, session):
    client.force_login(team.engineer)
    response = client.post(
        reverse("sessions:prompt", args=[session.pk]), {"text": "  "}, follow=True
    )
    assert "the prompt is empty" in response.content.decode()
    assert session.prompts.count() == 0


def test_a_non_member_cannot_post_to_a_session(client, team, session):
    client.force_login(team.outsider)
    assert (
        client.post(reverse("sessions:prompt", args=[session.pk]), {"text": "hi"}).status_code
        == 404
    )
    assert client.post(reverse("sessions:stop", args=[session.pk])).status_code == 404
    assert session.prompts.count() == 0


# Every kind, and one this version does not know (the fallback template).
ALL_KINDS = [*sorted(KINDS), "from_elsewhere"]


@pytest.mark.parametrize("payload", [{}, {"text": "<img src=x onerror=alert(1)>", "ok": False}])
def test_every_event_kind_renders_with_missing_or_hostile_fields(client, team, session, payload):
    # Stored as rows: append_events (in the tests) refuses a payload that does not fit its kind,
    # but the page must still show whatever an older or newer version stored.
    Event.objects.bulk_create(
        Event(session=session, seq=seq, kind=kind, payload=payload)
        for seq, kind in enumerate(ALL_KINDS, start=1)
    )
    Session.objects.filter(pk=session.pk).update(last_seq=len(ALL_KINDS))
    client.force_login(team.engineer)
    response = client.get(session.get_absolute_url())
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('class="event kind-') == len(ALL_KINDS)
    assert "<img src=x" not in page


def test_child_sessions_are_listed_on_the_parents_page(client, team, session):
    child = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Split: API", branch="main",
        parent=session, state="running",
    )  # fmt: skip
    client.force_login(team.reviewer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert f'href="{child.get_absolute_url()}"' in page and "Split: API" in page
    assert 'class="badge state-running"' in page


def test_the_timings_and_the_snapshot_age_at_start_are_shown(client, team, session):
    from snapshots.models import Snapshot

    session.snapshot = Snapshot.objects.create(
        repository=team.repository, branch="main", commit="0123456789abcdef", state="ready"
    )
    session.snapshot_age_s = 1500.0
    session.timings = {"restore_ms": 31.5, "sync_ms": 12.0, "first_event_ms": 240.0, "turn_ms": 900}
    session.save()
    client.force_login(team.engineer)
    page = client.get(session.get_absolute_url()).content.decode()
    for key, value in [("restore_ms", "31.5"), ("sync_ms", "12.0"), ("first_event_ms", "240.0")]:
        assert f"<dt>{key}</dt><dd>{value}</dd>" in page
    assert "<dt>turn_ms</dt><dd>900</dd>" in page
    assert "(<code>0123456789</code>), 25 min old at start" in page


def test_the_sessions_pending_approvals_are_listed_on_its_page(client, team, session):
    from approvals import gate

    pending = gate.request_approval(
        action="merge_pr", payload={"summary": "merge #1 into main"}, session=session,
        requested_by=team.engineer, prompt_author=team.engineer,
    )  # fmt: skip
    other = Session.objects.create(
        repository=team.repository, creator=team.engineer, title="Other", branch="main"
    )
    elsewhere = gate.request_approval(
        action="merge_pr", payload={"summary": "merge #2"}, session=other, requested_by=None
    )
    client.force_login(team.reviewer)
    page = client.get(session.get_absolute_url()).content.decode()
    assert f'href="{reverse("approvals:detail", args=[pending.pk])}"' in page
    assert "(pending, asked by engineer)" in page
    assert f'href="{reverse("approvals:detail", args=[elsewhere.pk])}"' not in page
