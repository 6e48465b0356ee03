"""Snapshots are filesystem images: made with snapshot_filesystem(ttl=None), restored by id."""

from __future__ import annotations

import pytest

from snapshots.sandbox import SandboxGone, SnapshotNotFound, SnapshotRef


def test_a_snapshot_is_a_modal_image_kept_until_deleted(fake_modal, sandbox):
    ref = sandbox.snapshot()

    call = fake_modal.recorder.last("Sandbox.snapshot_filesystem")
    assert call.kwargs["ttl"] is None  # the default would delete it after 30 days
    assert isinstance(call.kwargs["timeout"], int)
    assert ref.backend == "modal"
    assert ref.ref.startswith("im-") and ref.ref in fake_modal.images


def test_the_ref_survives_a_database_round_trip_and_restores_the_workspace(
    backend, fake_modal, sandbox
):
    sandbox.write_file("notes.txt", b"remember me")
    stored = str(sandbox.snapshot())  # what a Snapshot row keeps
    sandbox.terminate()

    restored = backend.create(snapshot=SnapshotRef.parse(stored))

    image_id = stored.removeprefix("modal:")
    assert fake_modal.recorder.last("Image.from_id").args == (image_id,)
    assert fake_modal.recorder.last("Image.hydrate").kwargs["client"] is fake_modal.clients[0]
    assert restored.read_file("notes.txt") == b"remember me"


def test_restoring_a_deleted_snapshot_raises_snapshot_not_found(backend, fake_modal, sandbox):
    ref = sandbox.snapshot()
    backend.delete_snapshot(ref)

    with pytest.raises(SnapshotNotFound, match="no longer exists"):
        backend.create(snapshot=ref)
    assert len(fake_modal.recorder.named("Sandbox.create")) == 1  # only the first sandbox


def test_delete_uses_modals_image_delete_and_is_idempotent(backend, fake_modal, sandbox):
    ref = sandbox.snapshot()

    backend.delete_snapshot(ref)
    backend.delete_snapshot(ref)

    deletes = fake_modal.recorder.named("experimental.image_delete")
    assert [c.args for c in deletes] == [(ref.ref,), (ref.ref,)]
    assert deletes[0].kwargs["client"] is fake_modal.clients[0]
    assert ref.ref not in fake_modal.images


@pytest.mark.parametrize(
    "ref", [SnapshotRef("local", "im-abc123"), SnapshotRef("modal", "../../etc/passwd")]
)
def test_refs_modal_did_not_make_are_refused_before_calling_it(backend, fake_modal, ref):
    with pytest.raises(SnapshotNotFound):
        backend.create(snapshot=ref)
    with pytest.raises(SnapshotNotFound):
        backend.delete_snapshot(ref)
    assert not fake_modal.recorder.named("Image.from_id")
    assert not fake_modal.recorder.named("experimental.image_delete")


def test_a_snapshot_can_be_built_from_a_host_directory(backend, fake_modal, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print('hi')\n")

    ref = backend.snapshot_from_directory(str(tmp_path))
    sandbox = backend.create(snapshot=ref)

    add = fake_modal.recorder.last("Image.add_local_dir")
    assert add.args == (str(tmp_path), "/workspace") and add.kwargs == {"copy": True}
    assert fake_modal.images[ref.ref].built_in.name == "inspect-web"
    assert sandbox.read_file("src/app.py") == b"print('hi')\n"


def test_a_missing_host_directory_is_reported(backend, tmp_path):
    with pytest.raises(FileNotFoundError):
        backend.snapshot_from_directory(str(tmp_path / "nope"))


def test_snapshotting_a_finished_sandbox_raises_gone(fake_modal, sandbox):
    fake_modal.only_sandbox().returncode = 0

    with pytest.raises(SandboxGone):
        sandbox.snapshot()
