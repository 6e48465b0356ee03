"""Attack: make the worker (root, on the host) read a host file through a link the repository
commits, so that it lands in `Snapshot.recipe_toml`, the lockfile hashes or the build log.

Host-side reads of repository files never follow links: a linked recipe (or a linked directory on
its path) fails the build naming the file; a linked lockfile is hashed as the link (its target).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from approvals.models import AuditEntry
from sessions.models import Event
from snapshots.models import Snapshot

pytestmark = pytest.mark.django_db

MARKER = "HOST-SECRET-7f3a9c"


@pytest.fixture
def host_secret(tmp_path):
    """A file outside the repository, readable by root only, as /etc/shadow is."""
    outside = tmp_path / "host-only"
    outside.mkdir()
    secret = outside / "environment.toml"
    secret.write_text(f'setup = ["echo {MARKER}"]\n# {MARKER}\n')
    secret.chmod(0o600)
    return secret


def linked_repository(make_git_repo, team, links: dict[str, str], files=None):
    upstream = make_git_repo(files=files or {"README.md": "# widgets\n"})
    for name, target in links.items():
        path = upstream.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
    upstream.git("add", "-A")
    upstream.git("commit", "--quiet", "-m", "links")
    team.repository.url = str(upstream.path)
    team.repository.save()
    return team.repository


def refresh(inspect_cli, repository) -> Snapshot:
    _, out, _ = inspect_cli("snapshot", "refresh", repository.name, "--json")
    return Snapshot.objects.get(pk=json.loads(out.strip().splitlines()[-1])["id"])


def assert_marker_nowhere(snapshot: Snapshot) -> None:
    snapshot.refresh_from_db()
    for value in (snapshot.recipe_toml, snapshot.log, snapshot.error, snapshot.lockfile_hashes):
        assert MARKER not in json.dumps(value)
    for payload in Event.objects.values_list("payload", flat=True):
        assert MARKER not in json.dumps(payload)
    for data in AuditEntry.objects.values_list("data", flat=True):
        assert MARKER not in json.dumps(data)


def test_a_linked_recipe_fails_the_build_naming_the_file(
    inspect_cli, make_git_repo, team, host_secret
):
    repository = linked_repository(
        make_git_repo, team, {".inspect/environment.toml": str(host_secret)}
    )
    snapshot = refresh(inspect_cli, repository)
    assert snapshot.state == "failed"
    assert ".inspect/environment.toml is a symbolic link" in snapshot.error
    assert snapshot.recipe_toml == ""
    assert_marker_nowhere(snapshot)


def test_a_linked_directory_on_the_recipes_path_is_refused_too(
    inspect_cli, make_git_repo, team, host_secret
):
    repository = linked_repository(make_git_repo, team, {".inspect": str(host_secret.parent)})
    snapshot = refresh(inspect_cli, repository)
    assert snapshot.state == "failed"
    assert ".inspect is a symbolic link" in snapshot.error
    assert_marker_nowhere(snapshot)


def test_a_linked_lockfile_is_hashed_as_the_link_not_the_host_file(
    inspect_cli, make_git_repo, team, host_secret
):
    repository = linked_repository(
        make_git_repo,
        team,
        {"requirements.txt": str(host_secret), "app/requirements-dev.txt": str(host_secret)},
        files={"README.md": "# widgets\n", "poetry.lock": "real = 1\n"},
    )
    snapshot = refresh(inspect_cli, repository)
    assert snapshot.state == "ready", snapshot.error
    content = hashlib.sha256(host_secret.read_bytes()).hexdigest()
    assert content not in snapshot.lockfile_hashes.values()
    assert snapshot.lockfile_hashes.keys() == {
        "poetry.lock",
        "requirements.txt",
        "app/requirements-dev.txt",
    }
    assert snapshot.lockfile_hashes["poetry.lock"] == hashlib.sha256(b"real = 1\n").hexdigest()
    link = hashlib.sha256(b"symlink:" + str(host_secret).encode()).hexdigest()
    assert snapshot.lockfile_hashes["requirements.txt"] == link
    assert_marker_nowhere(snapshot)


def test_a_linked_lockfile_directory_is_not_followed(inspect_cli, make_git_repo, team, host_secret):
    (host_secret.parent / "requirements.txt").write_text(f"{MARKER}\n")
    repository = linked_repository(make_git_repo, team, {"vendor": str(host_secret.parent)})
    snapshot = refresh(inspect_cli, repository)
    assert snapshot.state == "ready", snapshot.error
    assert snapshot.lockfile_hashes == {}
    assert_marker_nowhere(snapshot)
