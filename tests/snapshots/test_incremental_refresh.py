"""Incremental refresh: a refresh with no lockfile or recipe change stacks one layer on the
previous snapshot; an unmoved branch builds nothing; deep stacks are flattened; GC keeps what
newer snapshots stack on; the copy fallback restores stacked snapshots too."""

import json
import time

import pytest

from snapshots import incremental
from snapshots.backends import sandbox_backend
from snapshots.garbage import collect_snapshot_garbage
from snapshots.models import Snapshot
from snapshots.restore import restore_sandbox
from snapshots.sandbox import SnapshotRef
from snapshots.tasks import refresh_due_snapshots

pytestmark = pytest.mark.django_db

RECIPE = (
    'setup = ["echo setup-ran >> setup.log", "mkdir -p build && cp src/*.py build/"]\n'
    'refresh = ["echo refresh-ran >> refresh.log", "cp src/*.py build/"]\n'
)


@pytest.fixture
def widgets(make_git_repo, team):
    upstream = make_git_repo(
        files={
            "README.md": "# widgets\n",
            "requirements.txt": "six==1.16.0\n",
            "src/a.py": "A = 1\n",
            "src/b.py": "B = 1\n",
            ".inspect/environment.toml": RECIPE,
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    team.repository.upstream = upstream
    return team.repository


def refresh(inspect_cli, *extra: str) -> Snapshot:
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json", *extra)
    data = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and data["state"] == "ready", (data, err)
    return Snapshot.objects.get(pk=data["id"])


def run(repository, command: str) -> str:
    restored = restore_sandbox(repository, sync=False)
    try:
        result = restored.sandbox.run(command, cwd="/workspace")
        assert result.ok, result.stderr
        return result.stdout
    finally:
        restored.sandbox.terminate()


def test_a_source_change_stacks_one_layer_and_runs_refresh_not_setup(inspect_cli, widgets):
    first = refresh(inspect_cli)
    assert first.kind == "full" and first.layer_depth == 2  # the clone, then what setup made
    head = widgets.upstream.commit({"src/a.py": "A = 2\n", "src/c.py": "C = 3\n"})
    second = refresh(inspect_cli)
    assert second.kind == "incremental" and second.parent_id == first.pk
    assert second.commit == head and second.layer_depth == 3
    assert f"incremental refresh: stacked on snapshot {first.pk}" in second.log
    assert "$ echo refresh-ran >> refresh.log" in second.log
    assert "$ echo setup-ran" not in second.log
    assert 0 < second.added_bytes < 1024 * 1024
    out = run(widgets, "cat setup.log refresh.log build/a.py build/c.py; git status --short")
    assert out == "setup-ran\nrefresh-ran\nA = 2\nC = 3\n"  # a clean tree at the new commit
    assert run(widgets, "git rev-parse HEAD").strip() == head
    assert Snapshot.objects.get(pk=first.pk).state == "superseded"


def test_an_unmoved_branch_and_recipe_build_nothing_but_record_the_check(
    inspect_cli, widgets, client, team
):
    first = refresh(inspect_cli)
    again = refresh(inspect_cli)
    assert again.pk == first.pk and again.checked_at is not None
    assert Snapshot.objects.count() == 1
    code, out, _ = inspect_cli("snapshot", "list", "widgets", "--json")
    assert json.loads(out)[0]["checked_at"] == again.checked_at.isoformat()
    client.force_login(team.engineer)
    page = client.get("/snapshots/").content.decode()
    assert "branch and recipe unchanged, nothing rebuilt" in page
    # The check counts as the refresh: the scheduler does not queue another at once.
    assert widgets.pk not in refresh_due_snapshots()


def test_a_lockfile_change_rebuilds_from_scratch(inspect_cli, widgets):
    refresh(inspect_cli)
    widgets.upstream.commit({"requirements.txt": "six==1.17.0\n"})
    snapshot = refresh(inspect_cli)
    assert snapshot.kind == "full" and snapshot.parent_id is None
    assert "full build: requirements.txt changed since snapshot" in snapshot.log
    assert "$ echo setup-ran >> setup.log" in snapshot.log


def test_a_recipe_change_rebuilds_from_scratch(inspect_cli, widgets):
    refresh(inspect_cli)
    widgets.upstream.commit({".inspect/environment.toml": RECIPE + 'verify = ["true"]\n'})
    snapshot = refresh(inspect_cli)
    assert snapshot.kind == "full"
    assert "full build: the recipe changed since snapshot" in snapshot.log
    widgets.recipe_override = RECIPE
    widgets.save()
    assert refresh(inspect_cli).kind == "full"  # the dashboard's recipe now rules


def test_full_forces_a_rebuild(inspect_cli, widgets):
    first = refresh(inspect_cli)
    second = refresh(inspect_cli, "--full")
    assert second.pk != first.pk and second.kind == "full"


def test_a_failing_refresh_command_fails_the_build_and_keeps_the_last_snapshot(
    inspect_cli, widgets
):
    widgets.recipe_override = RECIPE.replace('"cp src/*.py build/"]', '"exit 4"]')
    widgets.save()
    good = refresh(inspect_cli)
    widgets.upstream.commit({"src/a.py": "A = 5\n"})
    code, out, _ = inspect_cli("snapshot", "refresh", "widgets", "--json")
    data = json.loads(out.strip().splitlines()[-1])
    assert code == 1 and data["error"] == "refresh command 'exit 4' failed with exit code 4"
    assert Snapshot.objects.filter(state="ready").get().pk == good.pk


def test_a_deep_stack_is_flattened_to_the_same_tree(inspect_cli, widgets):
    refresh(inspect_cli)
    for n in range(3):
        widgets.upstream.commit({"src/a.py": f"A = {n}\n", f"src/n{n}.py": "x\n"})
        deep = refresh(inspect_cli)
    assert deep.layer_depth == 5
    before = run(widgets, "find . -path ./.git -prune -o -type f -print | sort | xargs md5sum")
    old_ref = deep.backend_ref
    assert incremental.flatten_stack(deep.pk)
    deep.refresh_from_db()
    assert deep.layer_depth == 1 and deep.backend_ref != old_ref
    backend = sandbox_backend()
    assert len(backend.snapshot_layers(SnapshotRef.parse(deep.backend_ref))) == 1
    assert run(widgets, "find . -path ./.git -prune -o -type f -print | sort | xargs md5sum") == (
        before
    )
    # The next refresh stacks on the flat copy.
    widgets.upstream.commit({"src/b.py": "B = 9\n"})
    after = refresh(inspect_cli)
    assert after.kind == "incremental" and after.layer_depth == 2
    assert run(widgets, "cat build/b.py") == "B = 9\n"


@pytest.mark.django_db(transaction=True)
def test_a_refresh_at_the_flatten_depth_is_flattened_by_a_worker(
    inspect_cli, widgets, monkeypatch, celery_worker_process
):
    monkeypatch.setattr(incremental, "FLATTEN_DEPTH", 3)  # queue it at the first stacked layer
    refresh(inspect_cli)
    widgets.upstream.commit({"src/a.py": "A = 7\n"})
    snapshot = refresh(inspect_cli)
    assert snapshot.kind == "incremental"
    deadline = time.monotonic() + 120
    while Snapshot.objects.get(pk=snapshot.pk).layer_depth != 1:
        assert time.monotonic() < deadline, "the worker did not flatten the snapshot"
        time.sleep(0.2)
    snapshot.refresh_from_db()
    assert len(sandbox_backend().snapshot_layers(SnapshotRef.parse(snapshot.backend_ref))) == 1
    assert run(widgets, "cat build/a.py setup.log") == "A = 7\nsetup-ran\n"


def test_gc_never_deletes_a_layer_a_newer_snapshot_stacks_on(inspect_cli, widgets):
    first = refresh(inspect_cli)
    for n in range(3):
        widgets.upstream.commit({f"src/n{n}.py": f"N = {n}\n"})
        newest = refresh(inspect_cli)
    backend = sandbox_backend()
    first_layers = backend.snapshot_layers(SnapshotRef.parse(first.backend_ref))
    deleted = collect_snapshot_garbage(keep=1)
    assert first.pk in deleted and newest.pk not in deleted
    assert all(backend.store.layer_path(layer).exists() for layer in first_layers)
    assert run(widgets, "cat build/n0.py build/n2.py setup.log") == "N = 0\nN = 2\nsetup-ran\n"


def test_the_copy_fallback_restores_a_stacked_snapshot(inspect_cli, widgets, monkeypatch):
    refresh(inspect_cli)
    widgets.upstream.commit({"src/a.py": "A = 3\n"})
    stacked = refresh(inspect_cli)
    assert stacked.layer_depth == 3
    monkeypatch.setattr(sandbox_backend(), "overlay_problem", "disabled by force_copy=True")
    restored = restore_sandbox(widgets, sync=False)
    try:
        assert restored.sandbox.state["mode"] == "copy"
        assert restored.sandbox.run("cat build/a.py", cwd="/workspace").stdout == "A = 3\n"
    finally:
        restored.sandbox.terminate()


def test_a_previous_snapshot_whose_data_is_gone_is_rebuilt_from_scratch(inspect_cli, widgets):
    first = refresh(inspect_cli)
    sandbox_backend().delete_snapshot(SnapshotRef.parse(first.backend_ref))
    widgets.upstream.commit({"src/a.py": "A = 8\n"})
    snapshot = refresh(inspect_cli)
    assert snapshot.kind == "full" and "rebuilding from scratch" in snapshot.log
    assert run(widgets, "cat build/a.py") == "A = 8\n"
