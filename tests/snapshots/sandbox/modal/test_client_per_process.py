"""Each OS process gets its own Modal client: Celery prefork children must not share one."""

from __future__ import annotations

import os

import pytest

from snapshots.sandbox import modal_sdk


def test_one_client_per_process_made_from_the_explicit_credentials(backend, fake_modal):
    sandbox = backend.create(snapshot=None)
    sandbox.snapshot()
    backend.attach(sandbox.id)

    assert [c.args for c in fake_modal.recorder.named("Client.from_credentials")] == [
        ("ak-test", "as-test")
    ]
    client = fake_modal.clients[0]
    passed = [c.kwargs["client"] for c in fake_modal.calls if "client" in c.kwargs]
    assert passed and all(p is client for p in passed)


def test_the_app_is_looked_up_once_and_created_if_missing(backend, fake_modal):
    backend.create(snapshot=None)
    backend.create(snapshot=None)

    (lookup,) = fake_modal.recorder.named("App.lookup")
    assert lookup.args == ("inspect-web",)
    assert lookup.kwargs["create_if_missing"] is True
    assert lookup.kwargs["client"] is fake_modal.clients[0]


def test_a_new_process_id_gets_a_new_client_and_app(backend, fake_modal, monkeypatch):
    backend.create(snapshot=None)
    parent_client = fake_modal.clients[0]

    monkeypatch.setattr(modal_sdk.os, "getpid", lambda: -12345)  # as after a fork
    backend.create(snapshot=None)

    assert len(fake_modal.clients) == 2
    child_client = fake_modal.clients[1]
    assert child_client is not parent_client
    assert fake_modal.recorder.last("Sandbox.create").kwargs["client"] is child_client
    assert fake_modal.recorder.last("App.lookup").kwargs["client"] is child_client


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_reuse_the_parents_client(sdk, fake_modal):
    parent_client = sdk.client()
    read_end, write_end = os.pipe()

    pid = os.fork()
    if pid == 0:  # the child: report and leave without running pytest's teardown
        try:
            fresh = sdk.client() is not parent_client and sdk.client() is sdk.client()
            os.write(write_end, b"fresh" if fresh else b"reused")
        finally:
            os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 16)
    os.waitpid(pid, 0)

    assert answer == b"fresh"
    assert sdk.client() is parent_client  # the parent keeps its own
