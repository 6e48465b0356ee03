"""Finding 5 (disk): a sandbox can fill its own disk quota and nothing more.

The attack: write 1 GB from inside a sandbox whose quota is 64 MB, to the workspace and to the
private /tmp. It must stop at the quota with ENOSPC, be reported as ``limit_hit='disk'``, leave
the host's disk alone, and leave the sandbox usable once the file is deleted.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from snapshots.sandbox.base import LimitExceeded, Limits

MB = 1024 * 1024
QUOTA = 64 * MB
# Room for the filesystem's own metadata on top of the quota.
SLACK = 16 * MB
WRITE_1GB = "dd if=/dev/zero of={path} bs=1M count=1024 status=none"


def _skip_reason(runtime: str) -> str | None:
    if os.geteuid() != 0:
        return "the local backend needs root"
    if runtime == "runsc":
        from snapshots.sandbox import runsc

        problem = runsc.problem()
        return f"runsc cannot run here: {problem}" if problem else None
    return None


@pytest.fixture(params=["bwrap", "runsc"])
def backend(request, tmp_path):
    reason = _skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    from snapshots.sandbox.local import LocalBackend

    return LocalBackend(tmp_path / request.param, runtime=request.param)


@pytest.fixture
def small_sandbox(backend):
    sandbox = backend.create(snapshot=None, limits=Limits(disk_bytes=QUOTA))
    yield sandbox
    sandbox.terminate()


def host_bytes_used_by(backend, sandbox) -> int:
    """Blocks this sandbox holds on the host's disk: its state dir, which holds its writable
    layer (before the quota: the overlay upper dir; now: the disk image)."""
    out = subprocess.run(
        ["du", "-s", "-x", "-B1", str(backend.sandboxes_dir / sandbox.id)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])


@pytest.mark.parametrize("path", ["/workspace/fill.bin", "/tmp/fill.bin", "/var/tmp/fill.bin"])
def test_a_1gb_write_stops_at_the_quota_with_enospc(backend, small_sandbox, path):
    result = small_sandbox.run(WRITE_1GB.format(path=path), timeout=120)
    assert result.exit_code != 0
    assert "No space left on device" in result.stderr
    assert result.limit_hit == "disk"
    size = int(small_sandbox.run(["python3", "-c", f"import os;print(os.stat({path!r}).st_size)"])
               .stdout)  # fmt: skip
    assert size <= QUOTA
    assert host_bytes_used_by(backend, small_sandbox) <= QUOTA + SLACK


def test_the_sandbox_is_usable_again_once_the_file_is_deleted(small_sandbox):
    assert small_sandbox.run(WRITE_1GB.format(path="fill.bin"), timeout=120).limit_hit == "disk"
    with pytest.raises(LimitExceeded) as full:
        small_sandbox.write_file("more.bin", b"x" * (4 * MB))
    assert full.value.limit == "disk"
    assert small_sandbox.run("rm fill.bin").ok
    again = small_sandbox.run("dd if=/dev/zero of=again.bin bs=1M count=16 status=none && echo ok")
    assert again.ok and again.stdout == "ok\n" and again.limit_hit is None
    small_sandbox.write_file("note.txt", b"still writable\n")
    assert small_sandbox.read_file("note.txt") == b"still writable\n"


def test_a_failing_command_on_a_roomy_disk_is_not_blamed_on_the_quota(small_sandbox):
    result = small_sandbox.run("dd if=/dev/zero of=some.bin bs=1M count=4 status=none; exit 3")
    assert result.exit_code == 3 and result.limit_hit is None


def test_the_default_quota_comes_from_the_settings(settings, monkeypatch):
    if reason := _skip_reason("bwrap"):
        pytest.skip(reason)
    from snapshots import backends

    monkeypatch.setattr(backends, "_backends", {})
    settings.SANDBOX_RUNTIME = "bwrap"
    settings.SANDBOX_DISK_BYTES = QUOTA
    sandbox = backends.sandbox_backend("local").create(snapshot=None)  # no limits given
    try:
        result = sandbox.run(WRITE_1GB.format(path="fill.bin"), timeout=120)
        assert "No space left on device" in result.stderr and result.limit_hit == "disk"
        assert sandbox.state["limits"]["disk_bytes"] == QUOTA
    finally:
        sandbox.terminate()


@pytest.mark.django_db
def test_a_turn_that_fills_the_disk_reports_the_disk_limit(
    settings, monkeypatch, ready_repo, create_session
):
    from sessions.models import Event
    from snapshots import backends

    monkeypatch.setattr(backends, "_backends", {})
    settings.SANDBOX_DISK_BYTES = QUOTA
    code, summary, err = create_session(
        "--prompt", "fill the disk", "--inline",
        "--agent-command", WRITE_1GB.format(path="fill.bin"),
    )  # fmt: skip
    assert code == 0, err
    errors = [e.payload for e in Event.objects.filter(session_id=summary["id"], kind="error")]
    assert any(e.get("limit") == "disk" for e in errors), errors
    assert any("disk" in e["message"] for e in errors), errors
    assert summary["state"] == "idle"  # the turn still ends normally; the work is kept


@pytest.mark.django_db
def test_a_snapshot_build_that_fills_the_disk_fails_saying_so(
    settings, monkeypatch, team, inspect_cli, make_git_repo
):
    from snapshots import backends
    from snapshots.models import Snapshot

    monkeypatch.setattr(backends, "_backends", {})
    settings.SANDBOX_DISK_BYTES = QUOTA
    recipe = f'setup = ["{WRITE_1GB.format(path="fill.bin")}"]\n'
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": recipe})
    team.repository.url = str(upstream.path)
    team.repository.save()
    inspect_cli("snapshot", "refresh", "widgets", "--json")
    snapshot = Snapshot.objects.get(repository=team.repository)
    assert snapshot.state == Snapshot.State.FAILED
    assert "hit its disk limit" in snapshot.error
    assert "No space left on device" in snapshot.log
