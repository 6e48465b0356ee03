"""The event log: seq is gap-free and unique under concurrent appends, a producer's lines are
batched (200 or ~50 ms per transaction) and viewers are woken with the high-water seq only, and a
payload over 64 KiB is kept as an artifact with its head, tail and a link."""

import json
import threading
import time

import pytest
from django.core.files.storage import default_storage
from django.db import connection

from sessions import events
from sessions.events import EventWriter, append_events
from sessions.lease import DriverLease
from sessions.models import Event, Session
from sessions.runner import drive_session


@pytest.fixture
def session(team):
    return Session.objects.create(
        repository=team.repository, creator=team.engineer, title="log", branch="main"
    )


@pytest.fixture
def wake_ups(monkeypatch):
    calls = []
    monkeypatch.setattr(events, "notify", lambda session_id, seq: calls.append((session_id, seq)))
    return calls


@pytest.mark.django_db(transaction=True)
def test_concurrent_appenders_get_unique_gap_free_seqs_in_their_own_order(session):
    def producer(name: str) -> None:
        try:
            for i in range(40):
                append_events(session.pk, [("output", {"text": f"{name} {i}"})])
        finally:
            connection.close()

    threads = [threading.Thread(target=producer, args=(f"p{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = list(Event.objects.filter(session=session).order_by("seq").values_list("seq", "payload"))
    assert [seq for seq, _ in rows] == list(range(1, 161))
    for n in range(4):
        mine = [p["text"] for _, p in rows if p["text"].startswith(f"p{n} ")]
        assert mine == [f"p{n} {i}" for i in range(40)]
    session.refresh_from_db()
    assert session.last_seq == 160


@pytest.mark.django_db(transaction=True)
def test_a_producers_lines_are_written_200_at_a_time_and_stragglers_within_50_ms(session, wake_ups):
    with EventWriter(session.pk) as writer:
        for i in range(450):
            writer.add("output", {"text": f"line {i}"})
        # Two full batches went at once; the last 50 follow on the timer, without close().
        deadline = time.monotonic() + 2
        while Event.objects.filter(session=session).count() < 450:
            assert time.monotonic() < deadline, "the stragglers were never written"
            time.sleep(0.01)
    # Normally 200, 400, 450; a stalled machine may let the timer cut one batch short.
    seqs = [seq for _, seq in wake_ups]
    assert len(seqs) <= 4 and seqs == sorted(seqs) and seqs[-1] == 450, seqs
    assert {session_id for session_id, _ in wake_ups} == {session.pk}


@pytest.mark.django_db(transaction=True)
def test_a_single_line_is_written_within_about_50_ms(session, wake_ups):
    with EventWriter(session.pk) as writer:
        added = time.monotonic()
        writer.add("output", {"text": "alone"})
        while not Event.objects.filter(session=session).exists():
            time.sleep(0.005)
        waited = time.monotonic() - added
    assert waited < 0.5, f"a lone line waited {waited:.2f} s"
    assert wake_ups == [(session.pk, 1)]


@pytest.mark.django_db
def test_viewers_are_woken_with_the_seq_not_the_payload(session, monkeypatch):
    sent = []
    monkeypatch.setattr(events, "_layer_call", lambda coroutine: coroutine.close())

    class Layer:
        def group_send(self, group, message):
            sent.append((group, message))

            async def done():
                return None

            return done()

    monkeypatch.setattr(events, "get_channel_layer", lambda: Layer())
    events.notify(session.pk, 7)
    assert sent == [(f"session.{session.pk}", {"type": "events.available", "seq": 7})]


@pytest.mark.django_db
def test_a_payload_over_64_kib_becomes_an_artifact_with_head_tail_and_link(session):
    text = "begin " + "x" * 200_000 + " end"
    append_events(session.pk, [("output", {"stream": "stdout", "text": text})])
    payload = Event.objects.get(session=session).payload
    assert len(json.dumps(payload).encode()) <= 64 * 1024
    assert payload["text"].startswith("begin ") and payload["text_tail"].endswith(" end")
    assert payload["text_omitted"] > 0
    assert payload["artifact_bytes"] > 200_000
    # The link is served (to members: tests/security/test_event_artifacts.py).
    assert payload["artifact"].startswith(f"/sessions/{session.pk}/artifacts/output-")
    name = f"artifacts/session-{session.pk}/" + payload["artifact"].rsplit("/", 1)[-1]
    with default_storage.open(name) as stored:
        assert json.loads(stored.read())["text"] == text


@pytest.mark.django_db
def test_an_unknown_kind_is_refused_and_nothing_is_stored(session):
    with pytest.raises(ValueError, match="unknown event kind 'gossip'"):
        append_events(session.pk, [("output", {"text": "ok"}), ("gossip", {})])
    assert not Event.objects.filter(session=session).exists()


@pytest.mark.django_db
def test_a_second_driver_for_the_same_session_does_nothing(session):
    first = DriverLease(session.pk)
    assert first.acquire()
    try:
        assert drive_session(session.pk) == "already driven"
    finally:
        first.release()
    assert not Event.objects.filter(session=session).exists()


@pytest.mark.django_db(transaction=True)
def test_a_turns_first_event_is_written_as_it_is_added_and_the_rest_batched(session, wake_ups):
    with EventWriter(session.pk, first_at_once=True) as writer:
        writer.add("output", {"text": "first"})
        assert Event.objects.filter(session=session).count() == 1  # no wait for the timer
        for i in range(3):
            writer.add("output", {"text": f"then {i}"})
    seqs = [seq for _, seq in wake_ups]
    # Then batched again: one write (a stalled machine may let the timer cut it once).
    assert seqs[0] == 1 and seqs[-1] == 4 and len(seqs) <= 3, seqs
