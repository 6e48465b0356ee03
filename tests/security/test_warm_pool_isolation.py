"""Red team, warm pools: a sandbox is claimed once and never handed to another session; pool
sandboxes of one repository never serve another; a pool sandbox holds no secret before it is
claimed (sessions/warm_pool.py)."""

from __future__ import annotations

import os

import pytest

from inspect_web.redis_client import get_redis
from sessions import warm_pool
from sessions.models import Session
from snapshots.backends import sandbox_backend
from snapshots.models import Snapshot
from tests.approvals.conftest import secrets_key  # noqa: F401 - fixture
from tests.security.test_process_isolation import SCAN
from tests.security.test_process_isolation import SECRET as SCANNED

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root"),
]

SECRET = "s3cr3t-value-" + "9" * 24


@pytest.fixture(autouse=True)
def empty_pools(settings):
    settings.POOL_MAX_SANDBOXES = 8
    settings.POOL_MIN_PER_REPOSITORY = 1
    warm_pool.drain_pools()
    yield
    warm_pool.drain_pools()


def key(repository) -> str:
    return f"inspect:pool:{repository.pk}"


def test_a_sandbox_another_session_used_is_never_claimed(ready_repo, create_session, team):
    warm_pool.fill_pools()
    _, first, _ = create_session(
        "--prompt", "a", "--agent-command", "echo mine > a.txt", "--inline"
    )
    used = Session.objects.get(pk=first["id"]).sandbox_id
    # The attacker re-lists the used sandbox as a pool entry of the same repository and snapshot.
    snapshot = Snapshot.objects.get(repository=ready_repo, state="ready")
    forged = warm_pool.PoolEntry(
        used, ready_repo.pk, snapshot.pk, snapshot.commit, True, {"mode": "none", "domains": []}
    )
    get_redis().lpush(key(ready_repo), forged.dumps())

    _, second, _ = create_session("--prompt", "b", "--agent-command", "ls", "--inline")

    session = Session.objects.get(pk=second["id"])
    assert session.sandbox_id != used
    assert "pooled" not in session.timings  # not a member: the forged entry was refused
    assert sandbox_backend().attach(used).read_file("a.txt") == b"mine\n"  # left to its owner


def test_pool_sandboxes_of_one_repository_never_serve_another(
    ready_repo, team, inspect_cli, make_git_repo
):
    other = team.other_repository
    other.url = str(make_git_repo("gadgets", files={"README.md": "# gadgets\n"}).path)
    other.save()
    code, _, err = inspect_cli("snapshot", "refresh", "gadgets", "--json")
    assert code == 0, err
    warm_pool.fill_pools()
    [widget] = [warm_pool.PoolEntry.loads(r) for r in get_redis().lrange(key(ready_repo), 0, -1)]
    # A widgets pool entry planted in gadgets' pool is terminated, not handed out.
    get_redis().lpush(key(other), widget.dumps())
    gadgets_snapshot = Snapshot.objects.get(repository=other, state="ready")

    claimed = warm_pool.claim(other, gadgets_snapshot)

    assert claimed is not None and claimed.entry.repository_id == other.pk
    assert claimed.sandbox.id != widget.sandbox_id
    assert widget.sandbox_id not in sandbox_backend().list_sandboxes()
    # A widgets sandbox listed under gadgets' own ids: the sandbox's own record refuses it.
    warm_pool.fill_pools()
    [widget] = [warm_pool.PoolEntry.loads(r) for r in get_redis().lrange(key(ready_repo), 0, -1)]
    get_redis().delete(key(ready_repo))
    forged = warm_pool.PoolEntry(
        widget.sandbox_id, other.pk, gadgets_snapshot.pk, gadgets_snapshot.commit, True,
        {"mode": "none", "domains": []},
    )  # fmt: skip
    get_redis().lpush(key(other), forged.dumps())
    again = warm_pool.claim(other, gadgets_snapshot)
    assert again is None or again.sandbox.id != widget.sandbox_id
    if again is not None:
        again.sandbox.terminate()
    assert widget.sandbox_id not in sandbox_backend().list_sandboxes()
    # Nor does a widgets snapshot claim from gadgets' pool, or gadgets' from widgets'.
    widgets_snapshot = Snapshot.objects.get(repository=ready_repo, state="ready")
    assert warm_pool.claim(other, widgets_snapshot) is None
    assert warm_pool.claim(ready_repo, gadgets_snapshot) is None
    claimed.sandbox.terminate()


def test_a_pool_sandbox_holds_no_secret_until_it_is_claimed(
    team,
    secrets_key,  # noqa: F811
    inspect_cli,
    make_git_repo,
    create_session,
):
    from approvals.secrets import secret_set

    recipe = (
        'start = ["echo plain > /tmp/plain",'
        ' { command = "echo ${#NPM_TOKEN} > /tmp/seen", secrets = ["NPM_TOKEN"] }]\n'
    )
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": recipe})
    team.repository.url = str(upstream.path)
    team.repository.save()
    secret_set(repository=team.repository, name="NPM_TOKEN", value=SECRET, by=team.admin)
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, out + err
    warm_pool.fill_pools()
    [entry] = [
        warm_pool.PoolEntry.loads(r) for r in get_redis().lrange(key(team.repository), 0, -1)
    ]
    assert entry.started is False
    pooled = sandbox_backend().attach(entry.sandbox_id)
    # Nothing of the recipe's start ran, so nothing was given a secret.
    assert pooled.run("cat /tmp/seen /tmp/plain").exit_code != 0
    scan = pooled.run(["/usr/bin/python3", "-c", SCAN.replace(SCANNED, SECRET)]).stdout
    assert scan.startswith("CLEAN")

    _, summary, err = create_session("--prompt", "go", "--agent-command", "true", "--inline")

    assert summary["state"] == "idle", err
    assert Session.objects.get(pk=summary["id"]).sandbox_id == entry.sandbox_id
    assert pooled.run("cat /tmp/seen").stdout == f"{len(SECRET)}\n"  # start ran at the claim


def test_a_pool_sandbox_made_under_another_egress_policy_is_not_claimed(
    team, inspect_cli, make_git_repo
):
    from snapshots.models import Repository

    recipe = 'egress = { mode = "allowlist", domains = ["example.org"] }\n'
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": recipe})
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, out + err
    warm_pool.fill_pools()  # made under the approved policy: none
    [entry] = [
        warm_pool.PoolEntry.loads(r) for r in get_redis().lrange(key(team.repository), 0, -1)
    ]
    assert entry.egress["mode"] == "none"
    # The recipe's allowlist is approved: sandboxes from now on get it; the pool's has another.
    Repository.objects.filter(pk=team.repository.pk).update(
        approved_egress={"mode": "allowlist", "domains": ["example.org"]}
    )
    repository = Repository.objects.get(pk=team.repository.pk)

    claimed = warm_pool.claim(repository, Snapshot.objects.get(repository=repository))

    assert claimed is None
    assert entry.sandbox_id not in sandbox_backend().list_sandboxes()
