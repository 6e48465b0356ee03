"""A host reboot with live sandboxes: every sandbox process dies and every mount is gone (with
/run, where their workspaces are mounted), the workers start again, and each session's next turn
resumes from the session's own snapshot with everything its earlier turns did."""

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from sessions import services
from sessions.models import Event, Prompt, Session
from snapshots.backends import sandbox_backend
from tests.sessions.test_worker_killed import wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="the local sandboxes need root"),
]

APPEND = 'echo "$INSPECT_PROMPT" >> notes.txt; echo "notes: $(paste -sd, notes.txt)"'


def reboot(backend, sandbox_ids: list[str]) -> None:
    """What a reboot does to these sandboxes: SIGKILL every process (the init, what it
    started, the egress helpers), every mount undone, /run's files gone. Their directories
    under the sandbox root (on disk) stay, as they would."""
    for sandbox_id in sandbox_ids:
        state = backend._read_state(sandbox_id)
        keys = ("init_pid", "bwrap_pid", "proxy_pid", "nat_pid", "netns_pid")
        pids = {state.get(key) for key in keys}
        for path in (state.get("cgroups") or {}).values():
            procs = Path(path) / "cgroup.procs"
            if procs.exists():
                pids.update(int(p) for p in procs.read_text().split())
        for pid in [p for p in pids if p]:
            try:
                victims = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for victim in victims:
                with contextlib.suppress(psutil.NoSuchProcess):
                    victim.send_signal(signal.SIGKILL)
    base = str(backend.mount_base)
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for target in sorted(mounts, key=len, reverse=True):
        if target.startswith(base) and any(sid in target for sid in sandbox_ids):
            subprocess.run(["umount", "-l", target], check=True)
    for entry in backend.mount_base.iterdir():
        if any(entry.name.startswith(sid) for sid in sandbox_ids):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def outputs(session) -> list[str]:
    return list(
        Event.objects.filter(session=session, kind="output").values_list("payload__text", flat=True)
    )


def test_sessions_resume_from_their_own_snapshots_after_a_reboot(ready_repo, team, start_celery):
    worker = start_celery("worker")
    sessions = [
        services.session_create(
            repository=ready_repo, creator=team.engineer, prompt=f"one-{n}", agent_command=APPEND
        )
        for n in range(2)
    ]
    for session in sessions:
        wait_for(lambda s=session: Session.objects.get(pk=s.pk).state == "idle", 90, "turn 1")
    backend = sandbox_backend()
    live = [Session.objects.get(pk=s.pk).sandbox_id for s in sessions]
    assert all(live) and set(live) <= set(backend.list_sandboxes())

    os.killpg(worker.pid, signal.SIGKILL)  # the machine goes down with everything on it
    worker.wait()
    reboot(backend, live)
    assert not set(live) & set(backend.list_sandboxes())

    start_celery("worker")  # the machine is back, with `make run`'s processes
    start_celery("beat")
    second = [
        services.prompt_queue(session=session, author=team.engineer, text=f"two-{n}")
        for n, session in enumerate(sessions)
    ]
    for n, session in enumerate(sessions):
        try:
            wait_for(lambda p=second[n]: Prompt.objects.get(pk=p.pk).state == "done", 90, "turn 2")
        except AssertionError:
            last = [(e.kind, e.payload) for e in session.events.order_by("-seq")[:12]]
            pytest.fail(f"turn 2 did not finish; the last events: {last}")
        wait_for(lambda s=session: Session.objects.get(pk=s.pk).state == "idle", 30, "idle")
        session.refresh_from_db()
        assert outputs(session)[-1] == f"notes: one-{n},two-{n}"  # turn 1's work was kept
        assert session.sandbox_id not in live
        assert session.timings["restore_ms"] > 0  # restored from the session's own snapshot
        seqs = list(
            Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True)
        )
        assert seqs == list(range(1, len(seqs) + 1))
    backend.reap()  # the dead sandboxes' directories, as the beat's reaper would
    assert not any((backend.sandboxes_dir / sid).exists() for sid in live)
