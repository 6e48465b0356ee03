"""A timed-out Modal exec ends its streams and returns -1 from wait(): that is a timeout."""

from __future__ import annotations

import threading

import pytest

from snapshots.sandbox import Limits
from snapshots.sandbox import modal_sandbox as ms
from tests.snapshots.sandbox.modal.fake_process import FakeProcess


def test_minus_one_from_wait_is_reported_as_a_wall_time_timeout(fake_modal, sandbox):
    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["working...\n"], returncode=-1)

    result = sandbox.run("sleep 999", timeout=5)

    assert result.timed_out is True
    assert result.limit_hit == "wall_time"
    assert not result.ok
    assert result.exit_code == ms.SIGKILL_EXIT
    assert result.stdout == "working...\n"  # what it printed before the deadline is kept


def test_a_timed_out_command_has_its_process_group_killed(fake_modal, sandbox):
    fake_modal.on_exec = lambda argv, kw: FakeProcess(returncode=-1)

    sandbox.run("sleep 999 & sleep 999", timeout=1)

    command = next(
        c for c in fake_modal.recorder.named("Sandbox.exec") if c.args[3] == ms.EXEC_WRAPPER_NAME
    )
    pidfile = command.args[4]
    assert pidfile.startswith(ms.CONTROL_DIR + "/exec-")
    assert fake_modal.only_sandbox().controls[-1] == ("kill", (pidfile, "KILL"))


def test_a_command_exiting_by_itself_is_not_a_timeout(fake_modal, sandbox):
    fake_modal.on_exec = lambda argv, kw: FakeProcess(returncode=124)

    result = sandbox.run("timeout 1 sleep 5", timeout=60)

    assert result.exit_code == 124
    assert result.timed_out is False and result.limit_hit is None


@pytest.mark.parametrize(
    ("wall_seconds", "timeout", "sent"),
    [
        (30, 2.5, 3),  # Modal takes whole seconds; round up, never down to "no timeout"
        (30, 0.2, 1),
        (30, None, 30),  # the sandbox's wall limit applies when the exec asks for none
        (30, 100, 30),  # an exec can only shorten it
        (None, None, None),
    ],
)
def test_the_exec_timeout_is_whole_seconds_within_the_wall_limit(
    backend, fake_modal, wall_seconds, timeout, sent
):
    sandbox = backend.create(snapshot=None, limits=Limits(wall_seconds=wall_seconds))

    sandbox.run("true", timeout=timeout)

    assert fake_modal.recorder.last("Sandbox.exec").kwargs["timeout"] == sent


def test_kill_stops_a_running_command_and_its_group(fake_modal, sandbox):
    never = threading.Event()
    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["serving\n"], exit_gate=never)
    handle = sandbox.exec("python -m http.server")

    handle.kill()
    result = handle.wait()

    assert result.exit_code == ms.SIGKILL_EXIT
    assert result.timed_out is False
    assert [c[0] for c in fake_modal.only_sandbox().controls] == ["kill"]
    handle.kill()  # idempotent
    assert len(fake_modal.only_sandbox().controls) == 1
