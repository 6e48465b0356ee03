"""A new worker reattaches to a live sandbox by id; finished sandboxes are reported as gone."""

from __future__ import annotations

import pytest

from snapshots.sandbox import Limits, SandboxGone
from snapshots.sandbox.modal_backend import ModalBackend


def test_a_modal_id_reattaches_with_from_id(backend, fake_modal, sandbox, sdk):
    fresh_worker = ModalBackend(sdk=sdk)

    again = fresh_worker.attach(sandbox.id)

    assert again.id == sandbox.id
    assert fake_modal.recorder.last("Sandbox.from_id").args == (sandbox.id,)
    assert fake_modal.recorder.last("Sandbox.from_id").kwargs["client"] is fake_modal.clients[0]
    assert again.run("true").ok


def test_a_named_sandbox_reattaches_by_name_in_the_app(backend, fake_modal):
    backend.create(snapshot=None, sandbox_id="session-7")

    again = backend.attach("session-7")

    assert again.id == "session-7"
    call = fake_modal.recorder.last("Sandbox.from_name")
    assert call.args == ("inspect-web", "session-7")


def test_the_wall_time_limit_survives_reattaching(backend, fake_modal):
    backend.create(snapshot=None, sandbox_id="s-1", limits=Limits(wall_seconds=45))

    backend.attach("s-1").run("pytest")

    assert fake_modal.recorder.last("Sandbox.exec").kwargs["timeout"] == 45


def test_attaching_to_a_finished_sandbox_raises_gone(backend, fake_modal, sandbox):
    sandbox.terminate()

    with pytest.raises(SandboxGone):
        backend.attach(sandbox.id)


@pytest.mark.parametrize("unknown", ["sb-doesnotexist", "never-created"])
def test_attaching_to_an_unknown_sandbox_raises_gone(backend, unknown):
    with pytest.raises(SandboxGone, match=unknown):
        backend.attach(unknown)


def test_work_on_a_sandbox_that_died_raises_gone(fake_modal, sandbox):
    fake_modal.only_sandbox().returncode = 137  # e.g. Modal's lifetime timeout hit

    assert not sandbox.is_alive()
    with pytest.raises(SandboxGone, match=sandbox.id):
        sandbox.run("true")
    with pytest.raises(SandboxGone):
        sandbox.read_file("README.md")


def test_terminate_is_idempotent(fake_modal, sandbox):
    sandbox.terminate()
    sandbox.terminate()

    assert not sandbox.is_alive()
    assert len(fake_modal.recorder.named("Sandbox.terminate")) == 2


def test_list_sandboxes_names_the_live_ones_by_their_protocol_ids(backend, fake_modal):
    named = backend.create(snapshot=None, sandbox_id="session-1")
    anonymous = backend.create(snapshot=None)
    backend.create(snapshot=None, sandbox_id="session-dead").terminate()

    assert backend.list_sandboxes() == sorted([named.id, anonymous.id])
    call = fake_modal.recorder.last("Sandbox.list")
    assert call.kwargs["tags"] == {"inspect-web": "1"}
    assert call.kwargs["app_id"].startswith("ap-")
