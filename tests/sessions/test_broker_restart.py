"""The Celery broker (Redis on its unix socket, `redis+socket://`, as the embedded one is reached)
restarts while a worker runs a turn: the worker stays up, reconnects and runs the next turn.

The workers run as `make run` starts them (inspect_web/supervisor.py): the general worker's
prefork pool and the turns worker's threads, each with a turn in flight (acknowledged late) when
Redis dies, so the consumer's connection is lost while its BRPOP is pending and a delivery is
unacknowledged. The Redis comes back empty, as a crashed one without persistence: the turn's
driver lease and its fencing counter are gone, beat requeues the turn and a new driver, with a
newer token than the old one, resumes it (sessions/lease.py)."""

import subprocess
import sys
import time

import pytest
from django.conf import settings

from sessions.models import Event, Prompt, Session
from tests.conftest import _stop_process, child_env, purge_task_queues
from tests.sessions.stream.conftest import PrivateRedis

pytestmark = pytest.mark.django_db(transaction=True)

LINES = 30
AGENT = f"for i in $(seq 1 {LINES}); do echo line-$i; sleep 0.2; done"
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
FOLLOW_UP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from sessions import services
from sessions.models import Session
services.prompt_queue(session=Session.objects.get(pk=int(sys.argv[1])),
    author=get_user_model().objects.get(username="engineer"), text="again")
"""
POOLS = {
    "prefork": ["--concurrency", "2"],
    "threads": ["-P", "threads", "--concurrency", "4", "--without-mingle", "--without-gossip"],
}


def wait_for(predicate, timeout: float, what: str, worker: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert worker.poll() is None, f"the worker exited ({worker.returncode}) waiting for {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


def in_child(script: str, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + script, *args],
        env=env, cwd=settings.BASE_DIR, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_a_worker_survives_a_broker_restart_mid_turn_and_runs_the_next_turn(
    ready_repo, tmp_path, pool
):
    purge_task_queues()  # the shared broker's leftovers: this test's worker uses its own Redis
    broker = PrivateRedis(tmp_path)
    broker.start()
    env = child_env(REDIS_URL=broker.url)  # broker, channel layer and cache: the private Redis
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - the worker writes it
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "inspect_web", "worker", "-l", "info",
         "-Q", f"celery,{settings.TURN_QUEUE}", *POOLS[pool],
         "-n", f"broker-restart-{time.monotonic_ns()}@%h"],
        env=env, cwd=settings.BASE_DIR, start_new_session=True, stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    # Beat requeues a turn whose driver lease was lost with Redis's memory (sessions/lease.py).
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "inspect_web", "beat", "-l", "warning",
         "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
        env=env, cwd=settings.BASE_DIR, start_new_session=True, stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        session_id = int(in_child(CREATE, AGENT, env=env).strip().splitlines()[-1])

        def printed(n: int) -> bool:
            return Event.objects.filter(session_id=session_id, payload__text=f"line-{n}").exists()

        wait_for(lambda: printed(3), 90, "the agent to print its first lines", worker)
        broker.kill()
        time.sleep(2)
        broker.start()
        wait_for(lambda: printed(LINES), 120, "the turn to go on printing", worker)

        def prompts_done() -> int:
            return Prompt.objects.filter(session_id=session_id, state="done").count()

        wait_for(lambda: prompts_done() == 1, 120, "the first turn to end", worker)
        in_child(FOLLOW_UP, str(session_id), env=env)
        wait_for(lambda: prompts_done() == 2, 90, "the worker to run the next turn", worker)
        # The prompt is done before the turn has published and come to rest.
        wait_for(
            lambda: Session.objects.get(pk=session_id).state == "idle", 30,
            "the session to come to rest", worker,
        )  # fmt: skip
        seqs = list(
            Event.objects.filter(session_id=session_id)
            .order_by("seq")
            .values_list("seq", flat=True)
        )
        assert seqs == list(range(1, len(seqs) + 1)), "a gap in the log"
        assert worker.poll() is None, "the worker exited"
    finally:
        _stop_process(worker)
        _stop_process(beat)
        log.close()
        broker.kill()
        text = (tmp_path / "worker.log").read_text(errors="replace")
        assert "Unrecoverable error" not in text, text[-4000:]
