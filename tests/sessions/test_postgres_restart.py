"""PostgreSQL restarts while a turn runs (every connection cut, refused for two seconds): the turn
resumes and finishes, the log stays gap-free and no line the agent printed is lost. The worker
runs on a private PostgreSQL server (a copy of the test database), which the test restarts."""

import subprocess
import sys
import time

import psycopg
import pytest
from django.conf import settings

from inspect_web.celery import app
from tests import private_postgres
from tests.conftest import _stop_process, child_env, test_database_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("private_postgres.problem() is not None", reason="no private PostgreSQL"),
    pytest.mark.skipif("'postgres' not in test_database_url()", reason="runs on PostgreSQL"),
]

LINES = 40
AGENT = f"for i in $(seq 1 {LINES}); do echo line-$i; sleep 0.1; done; echo done > done.txt"
CREATE = """
import django; django.setup()
from django.contrib.auth import get_user_model
from sessions import services
from snapshots.models import Repository
session = services.session_create(
    repository=Repository.objects.get(name="widgets"),
    creator=get_user_model().objects.get(username="engineer"),
    prompt="print lines", agent_command=sys.argv[1])
print(session.pk)
"""


@pytest.fixture
def private_pg():
    server = private_postgres.PrivatePostgres().init()
    yield server
    server.close()


def query(url: str, sql: str, *args) -> list[tuple]:
    """One query on a fresh connection; [] while the server is down."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return conn.execute(sql, args).fetchall()
    except psycopg.OperationalError:
        return []


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


def test_a_turn_survives_a_postgresql_restart_without_losing_events(ready_repo, private_pg):
    from django.db import connection

    connection.close()  # the dump below must see every committed row
    url = private_pg.copy_database(test_database_url(), "inspect_faults")
    env = child_env(DATABASE_URL=url)
    app.control.purge()
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "inspect_web", "worker", "-P", "solo",
         "-l", "warning", "--without-mingle", "--without-gossip",
         "-Q", f"celery,{settings.TURN_QUEUE}", "-n", f"pg-restart-{time.monotonic_ns()}@%h"],
        env=env, cwd=settings.BASE_DIR, start_new_session=True,
    )  # fmt: skip
    try:
        created = subprocess.run(
            [sys.executable, "-c", "import sys\n" + CREATE, AGENT],
            env=env, cwd=settings.BASE_DIR, check=True, capture_output=True, text=True,
        )  # fmt: skip
        session_id = int(created.stdout.strip().splitlines()[-1])
        outputs = "SELECT payload->>'text' FROM agent_sessions_event WHERE session_id = %s AND kind = 'output' ORDER BY seq"  # noqa: E501

        def printed(n: int) -> bool:
            return f"line-{n}" in [t for (t,) in query(url, outputs, session_id)]

        wait_for(lambda: printed(5), 90, "the agent to print its first lines")
        private_pg.restart(down_seconds=2)

        def state() -> str:
            rows = query(url, "SELECT state FROM agent_sessions_session WHERE id = %s", session_id)
            return rows[0][0] if rows else ""

        wait_for(lambda: state() in {"idle", "failed"}, 120, "the turn to end")
        events = query(
            url,
            "SELECT seq, kind, payload FROM agent_sessions_event WHERE session_id = %s "
            "ORDER BY seq",
            session_id,
        )
        seqs = [seq for seq, _, _ in events]
        assert seqs == list(range(1, len(seqs) + 1)), "a gap in the log"
        assert state() == "idle", [(k, p) for _, k, p in events if k in {"state", "error"}]
        reasons = [p.get("reason", "") for _, kind, p in events if kind == "state"]
        assert any(r.startswith("resuming") for r in reasons), "the restart missed the turn"
        texts = [p.get("text") for _, kind, p in events if kind == "output"]
        missing = [n for n in range(1, LINES + 1) if f"line-{n}" not in texts]
        assert missing == [], "lines the agent printed are missing from the log"
        (prompt_state,) = query(
            url, "SELECT state FROM agent_sessions_prompt WHERE session_id = %s", session_id
        )
        assert prompt_state == ("done",)
    finally:
        _stop_process(worker)
