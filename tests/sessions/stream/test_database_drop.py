"""When the database drops the appending connection mid-append, the append is retried: the log
stays gap-free and every line the agent produced is in it, and viewers see all of it."""

import threading
import time

import pytest
from django.db import connection

from tests.sessions.stream.conftest import in_thread
from tests.sessions.stream.viewer import Viewer

pytestmark = pytest.mark.django_db(transaction=True)


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"


@pytest.mark.skipif("not on_postgresql()", reason="needs pg_terminate_backend (PostgreSQL only)")
async def test_a_dropped_database_connection_mid_append_leaves_no_gap(
    daphne, watched_session, cookies
):
    from sessions.events import EventWriter
    from sessions.models import Event

    total = 4000
    done = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        from django.db import connection as own

        try:
            with EventWriter(watched_session.pk) as writer:
                for n in range(total):
                    writer.add("output", {"n": n, "line": "z" * 200})
                    if n % 40 == 0:
                        time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()
            done.set()

    def terminate_appenders() -> int:
        """Kill the appending backend while it is inserting, as a failover or a reaper of
        connections does; a few times, far enough apart that each kill is a transient drop
        (a retry 50 ms later gets through), not an outage."""
        from django.db import connection as own

        killed = 0
        try:
            while not done.is_set() and killed < 6:
                with own.cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                        "AND state <> 'idle' AND query ILIKE '%%INSERT INTO%%event%%'"
                    )
                    hits = sum(1 for (ok,) in cursor.fetchall() if ok)
                killed += hits
                time.sleep(0.4 if hits else 0.005)
        finally:
            own.close()
        return killed

    viewer = Viewer(daphne, watched_session.pk, cookies["engineer"])
    await viewer.connect()
    producer = threading.Thread(target=produce)
    producer.start()
    killed = await in_thread(terminate_appenders)
    producer.join()
    assert not errors, errors
    assert killed >= 1, "no append was caught in flight; the test did not test anything"

    rows = await in_thread(
        lambda: list(
            Event.objects.filter(session=watched_session)
            .order_by("seq")
            .values_list("seq", "payload__n")
        )
    )
    seqs = [seq for seq, _ in rows]
    assert seqs == list(range(1, len(rows) + 1))  # gap-free
    produced = [n for _, n in rows]
    assert set(produced) == set(range(total))  # nothing the agent said was lost
    assert len(produced) == total, "a retried batch was stored twice"
    await viewer.follow(len(rows))
    assert viewer.seqs == seqs
    await viewer.close()


def test_a_commit_whose_reply_was_lost_is_not_stored_twice(watched_session, monkeypatch):
    """The connection drops after the database committed but before it said so: the retry
    finds the batch in place instead of appending it again."""
    from django.db import OperationalError

    from sessions.events import append_events
    from sessions.models import Event

    append_events(watched_session.pk, [("output", {"n": -1})])
    drops = []
    if on_postgresql():
        # The append is one statement in autocommit: it is committed when its reply comes.
        import psycopg

        real_fetchone = psycopg.Cursor.fetchone

        def committed_then_drop(cursor):
            row = real_fetchone(cursor)
            if not drops:
                drops.append(1)
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return row

        monkeypatch.setattr(psycopg.Cursor, "fetchone", committed_then_drop)
    else:
        real_commit = connection.commit

        def commit_then_drop():
            real_commit()
            if not drops:
                drops.append(1)
                raise OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(connection, "commit", commit_then_drop)
    high = append_events(watched_session.pk, [("output", {"n": n}) for n in range(5)])
    assert drops == [1]
    assert high == 6
    stored = list(
        Event.objects.filter(session=watched_session).order_by("seq").values_list("seq", "payload")
    )
    assert stored == [(1, {"n": -1})] + [(n + 2, {"n": n}) for n in range(5)]
