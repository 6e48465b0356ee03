"""Local-backend specifics: layer stacking, flattening, whiteouts, copy fallback, gc."""

from __future__ import annotations

import os
import stat

import pytest

from snapshots.sandbox.base import NetworkPolicy


@pytest.fixture
def local_root(backend, caps, tmp_path):
    if "local_layout" not in caps:
        pytest.skip("local backend internals")
    return tmp_path


def _backend(backend, root, **kw):
    from snapshots.sandbox.local import LocalBackend

    return LocalBackend(root, runtime=backend.runtime, **kw)


def test_freezing_costs_only_the_changes(backend, base_snapshot, new_sandbox):
    if not hasattr(backend, "store"):
        pytest.skip("local backend internals")
    sb = new_sandbox()
    sb.run("rm README.md; echo new > added.txt")
    ref = sb.snapshot()
    layers = backend.store.read_snapshot(ref.ref)["layers"]
    base_layers = backend.store.read_snapshot(base_snapshot.ref)["layers"]
    assert layers[:-1] == base_layers  # stacked on the parent, not a copy of it
    top = backend.store.layer_path(layers[-1])
    assert sorted(os.listdir(top)) == ["README.md", "added.txt"]
    st = os.lstat(top / "README.md")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0  # an overlay whiteout


def test_deep_stacks_are_flattened(backend, local_root, tmp_path_factory):
    be = _backend(backend, local_root / "be", max_layers=3)
    src = tmp_path_factory.mktemp("flat-src")
    (src / "keep").write_text("k")
    (src / "gone").write_text("g")
    ref = be.snapshot_from_directory(str(src))
    sbs = []
    try:
        for i in range(5):
            sb = be.create(snapshot=ref, network=NetworkPolicy("none"))
            sbs.append(sb)
            sb.run(f"rm -f gone; echo {i} > gen")
            ref = sb.snapshot()
            assert len(be.store.read_snapshot(ref.ref)["layers"]) <= 3
        final = be.create(snapshot=ref)
        sbs.append(final)
        assert final.read_file("gen") == b"4\n"
        assert final.read_file("keep") == b"k"
        assert final.run("test -e gone").exit_code == 1
    finally:
        for sb in sbs:
            sb.terminate()


def test_copy_fallback_works_and_says_so(backend, local_root, base_snapshot):
    be = _backend(backend, local_root / "copy", force_copy=True)
    assert any("COPY fallback" in line for line in be.doctor())
    src = local_root / "src"
    src.mkdir()
    (src / "f").write_text("v1")
    ref = be.snapshot_from_directory(str(src))
    sb = be.create(snapshot=ref)
    try:
        sb.run("echo v2 > f; echo n > new")
        sb2 = be.create(snapshot=sb.snapshot())
        try:
            assert sb2.read_file("f") == b"v2\n" and sb2.read_file("new") == b"n\n"
        finally:
            sb2.terminate()
    finally:
        sb.terminate()


def test_delete_snapshot_collects_unused_layers(backend, local_root):
    be = _backend(backend, local_root / "gc")
    src = local_root / "src"
    src.mkdir()
    (src / "f").write_text("x")
    ref = be.snapshot_from_directory(str(src))
    layer = be.store.read_snapshot(ref.ref)["layers"][0]
    sb = be.create(snapshot=ref)
    be.delete_snapshot(ref)
    assert be.store.layer_path(layer).exists()  # still mounted by a live sandbox
    assert sb.read_file("f") == b"x"
    sb.terminate()
    be.gc()
    assert not be.store.layer_path(layer).exists()


def test_doctor_reports_capabilities(backend, caps):
    if "local_layout" not in caps:
        pytest.skip("local backend")
    text = "\n".join(backend.doctor())
    assert "overlayfs" in text and "runsc" in text


def test_orphans_of_a_deleted_root_are_reaped(backend, local_root):
    import secrets
    import shutil
    from pathlib import Path

    from snapshots.sandbox.local import reap_orphans

    # The mount base must be reachable by the sandbox user, so not under the 0700 tmp dir.
    mnt = Path("/run/inspect-sandboxes") / f"test-{secrets.token_hex(4)}"
    try:
        be = _backend(backend, local_root / "orphan-root", mount_base=mnt / "tag")
        sb = be.create(snapshot=None)
        sb.run("sleep 4545.5 &")
        pid = sb.state["init_pid"]
        shutil.rmtree(local_root / "orphan-root")  # e.g. pytest cleaning an old tmp dir
        assert reap_orphans(mnt) == [sb.id]
        with (
            open(f"/proc/{pid}/stat") if os.path.exists(f"/proc/{pid}") else open(os.devnull) as fh
        ):
            stat_line = fh.read()
        assert not stat_line or stat_line.rsplit(") ", 1)[1][0] in "ZX"
        with open("/proc/self/mountinfo") as fh:
            assert str(mnt) not in fh.read()
    finally:
        shutil.rmtree(mnt, ignore_errors=True)
