import json

import pytest

from snapshots import mirror

pytestmark = pytest.mark.django_db


@pytest.fixture
def built(inspect_cli, widgets):
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, (out, err)
    return widgets


def test_exec_streams_the_output_and_exits_with_the_commands_status(inspect_cli, built):
    code, out, err = inspect_cli(
        "sandbox", "exec", "widgets", "--", "sh", "-c", "echo out; echo err >&2; exit 7"
    )
    assert code == 7
    assert out.splitlines()[0] == "out"
    assert "err" in err


def test_exec_json_prints_timings_after_the_output(inspect_cli, built):
    code, out, _ = inspect_cli("sandbox", "exec", "widgets", "--json", "--", "echo", "hello")
    lines = out.strip().splitlines()
    assert lines[0] == "hello"
    timings = json.loads(lines[-1])
    assert code == 0
    assert timings["exit_code"] == 0
    for key in ["restore_ms", "exec_ms", "total_ms"]:
        assert timings[key] > 0
    assert timings["total_ms"] >= timings["restore_ms"] + timings["exec_ms"] * 0.99


def test_the_sandbox_sees_none_of_the_hosts_secrets(inspect_cli, built, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "do-not-leak-" + "x" * 40)
    code, out, _ = inspect_cli("sandbox", "exec", "widgets", "--", "env")
    assert code == 0
    assert "do-not-leak" not in out
    assert "DATABASE_URL" not in out


def test_commits_made_after_the_snapshot_are_caught_up_from_the_mirror(inspect_cli, built):
    built.upstream.commit({"NEWS.md": "fresh\n"}, "add news")
    mirror.update_mirror(built.name, built.url)
    code, out, _ = inspect_cli("sandbox", "exec", "widgets", "--json", "--", "cat", "NEWS.md")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0] == "fresh"
    assert json.loads(lines[-1])["drift_commits"] == 1


def test_a_changed_lockfile_reruns_setup_and_queues_a_refresh(
    inspect_cli, built, django_capture_on_commit_callbacks
):
    built.upstream.commit({"requirements.txt": "six==1.17.0\n"}, "bump six")
    mirror.update_mirror(built.name, built.url)
    with django_capture_on_commit_callbacks() as callbacks:
        code, out, err = inspect_cli("sandbox", "exec", "widgets", "--", "cat", "setup.log")
    assert code == 0, err
    assert out.splitlines()[:2] == ["setup-ran", "setup-ran"]
    assert len(callbacks) == 1  # the refresh of the repository's snapshot


def test_exec_without_a_snapshot_says_how_to_build_one(inspect_cli, widgets):
    code, _, err = inspect_cli("sandbox", "exec", "widgets", "--", "true")
    assert code == 1
    assert "widgets has no ready snapshot of branch 'main'" in err
    assert "inspect snapshot refresh widgets" in err
