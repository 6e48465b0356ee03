import json
import threading
import time

import pytest

from inspect_web.redis_client import get_redis
from snapshots.models import Snapshot
from snapshots.restore import newest_ready

pytestmark = pytest.mark.django_db


def refresh(inspect_cli, name="widgets"):
    code, out, err = inspect_cli("snapshot", "refresh", name, "--json")
    return code, json.loads(out.strip().splitlines()[-1]), err


def test_refresh_builds_a_ready_snapshot_and_prints_it_as_json(inspect_cli, widgets):
    code, data, _ = refresh(inspect_cli)
    assert code == 0
    head = widgets.upstream.git("rev-parse", "HEAD").strip()
    assert data["state"] == "ready"
    assert data["commit"] == head
    assert data["build_seconds"] > 0
    assert data["file_count"] >= 4
    assert data["size_bytes"] > 0
    snapshot = Snapshot.objects.get(pk=data["id"])
    assert "$ echo setup-ran >> setup.log" in snapshot.log
    assert snapshot.lockfile_hashes.keys() == {"requirements.txt"}


def test_setup_output_lands_in_the_snapshot(inspect_cli, widgets):
    refresh(inspect_cli)
    code, out, _ = inspect_cli("sandbox", "exec", "widgets", "--", "cat", "setup.log")
    assert code == 0
    assert out.splitlines()[0] == "setup-ran"


def test_a_failing_setup_keeps_the_last_good_snapshot_serving(inspect_cli, widgets):
    _, good, _ = refresh(inspect_cli)
    widgets.upstream.commit(
        {".inspect/environment.toml": 'setup = ["echo compiling", "echo broken >&2; exit 3"]\n'}
    )
    code, bad, err = refresh(inspect_cli)
    assert code == 1
    assert bad["state"] == "failed"
    assert "setup command 'echo broken >&2; exit 3' failed with exit code 3" in bad["error"]
    failed = Snapshot.objects.get(pk=bad["id"])
    assert failed.exit_code == 3
    assert "compiling" in failed.log and "broken" in failed.log
    assert newest_ready(widgets).pk == good["id"]
    assert "build failed" in err


def test_a_recipe_that_does_not_parse_fails_the_build_with_its_location(inspect_cli, widgets):
    widgets.upstream.commit({".inspect/environment.toml": "setup = [\n"})
    code, data, _ = refresh(inspect_cli)
    assert code == 1
    assert data["error"].startswith(".inspect/environment.toml does not parse")
    assert not Snapshot.objects.filter(state="ready").exists()


def test_the_dashboard_recipe_overrides_the_repository_file(inspect_cli, widgets):
    widgets.recipe_override = 'setup = ["echo from-dashboard > origin.txt"]\n'
    widgets.save()
    refresh(inspect_cli)
    _, out, _ = inspect_cli("sandbox", "exec", "widgets", "--", "cat", "origin.txt")
    assert out.strip() == "from-dashboard"


def test_an_unreachable_repository_fails_the_build_clearly(inspect_cli, widgets):
    widgets.url = "/nonexistent/widgets.git"
    widgets.save()
    code, data, _ = refresh(inspect_cli)
    assert code == 1
    assert data["error"] == "cannot fetch the repository: /nonexistent/widgets.git does not exist"


def test_an_unknown_repository_lists_the_known_ones(inspect_cli, widgets):
    code, _, err = inspect_cli("snapshot", "refresh", "gizmos")
    assert code == 1
    assert "no repository named 'gizmos' (known: gadgets, widgets)" in err


def test_a_new_build_supersedes_the_previous_ready_snapshot(inspect_cli, widgets):
    _, first, _ = refresh(inspect_cli)
    widgets.upstream.commit({"README.md": "# widgets, again\n"})
    _, second, _ = refresh(inspect_cli)
    assert second["id"] != first["id"]
    assert Snapshot.objects.get(pk=first["id"]).state == "superseded"
    assert newest_ready(widgets).pk == second["id"]


@pytest.mark.django_db(transaction=True)
def test_a_refresh_during_a_build_waits_for_it_instead_of_building_twice(
    inspect_cli, make_git_repo, django_user_model
):
    from snapshots.build import snapshot_build
    from snapshots.models import Repository

    upstream = make_git_repo()
    repository = Repository.objects.create(name="solo", url=str(upstream.path))
    existing = Snapshot.objects.create(repository=repository, branch="main", state="ready")
    lock = get_redis().lock(f"inspect:snapshot-build:{repository.pk}", timeout=60)
    assert lock.acquire(blocking=False)
    results = []
    waiter = threading.Thread(target=lambda: results.append(snapshot_build(repository)))
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive()  # waiting for the build "under way"
    lock.release()
    waiter.join(timeout=30)
    assert results[0].pk == existing.pk
    assert Snapshot.objects.filter(repository=repository).count() == 1
