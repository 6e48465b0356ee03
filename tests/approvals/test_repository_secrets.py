"""Repository secrets: encrypted at rest, given to setup/start (and the agent where marked),
never in a snapshot, redacted from every stored event and build log."""

from __future__ import annotations

import secrets as random

import pytest
from django.conf import settings

from approvals.models import AuditEntry, RepositorySecret
from approvals.secrets import SecretsUnavailable, secret_env, secret_set
from sessions.events import append_event
from sessions.models import Event

TOKEN = "tok-" + random.token_hex(16)
RECIPE = (
    'setup = ["test -n \\"$DEPLOY_TOKEN\\" && echo setup got $DEPLOY_TOKEN'
    ' && echo ${#DEPLOY_TOKEN} > token-length"]\n'
    # A start command gets a secret only by naming it (it then runs as a service).
    'start = [{command = "test -n \\"$DEPLOY_TOKEN\\"", secrets = ["DEPLOY_TOKEN"]}]\n'
)


def _tree_holds(snapshot, needle: bytes) -> list[str]:
    """Every file of the snapshot's layers (and its metadata) that contains `needle`."""
    from snapshots.backends import sandbox_backend
    from snapshots.sandbox import SnapshotRef

    store = sandbox_backend().store
    ref = SnapshotRef.parse(snapshot.backend_ref).ref
    found = []
    paths = [store.layer_path(layer) for layer in store.read_snapshot(ref)["layers"]]
    paths.append(store.snapshots_dir)
    for root in paths:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(str(path))
    return found


def test_a_value_is_encrypted_at_rest_and_its_change_audited(team, secrets_key):
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    row = RepositorySecret.objects.get()
    assert TOKEN not in row.encrypted_value
    assert secret_env(team.repository, scope="setup_start") == {"DEPLOY_TOKEN": TOKEN}
    entry = AuditEntry.objects.get(action="secret.add")
    assert entry.data == {"name": "DEPLOY_TOKEN", "scope": "setup_start"}
    assert TOKEN not in str(entry.data)


def test_without_a_key_using_a_secret_fails_with_a_clear_error(team, settings):
    settings.SECRETS_KEY = ""
    with pytest.raises(SecretsUnavailable, match="INSPECT_SECRETS_KEY is not set"):
        secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    settings.SECRETS_KEY = "not-a-key"
    with pytest.raises(SecretsUnavailable, match="not a valid Fernet key"):
        secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)


def test_only_agent_scoped_secrets_reach_the_agent(team, secrets_key):
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    secret_set(
        repository=team.repository,
        name="NPM_TOKEN",
        value="npm-" + TOKEN,
        scope="agent",
        by=team.admin,
    )
    assert secret_env(team.repository, scope="agent") == {"NPM_TOKEN": "npm-" + TOKEN}
    assert set(secret_env(team.repository, scope="setup_start")) == {"DEPLOY_TOKEN", "NPM_TOKEN"}


def test_secret_values_are_redacted_from_stored_events(team, secrets_key, agent_session):
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    append_event(
        agent_session.pk, "output", {"stream": "stdout", "text": f"token is {TOKEN}!", TOKEN: 1}
    )
    payload = Event.objects.get(session=agent_session, kind="output").payload
    assert payload == {"stream": "stdout", "text": "token is [redacted]!", "[redacted]": 1}


def test_setup_and_start_get_the_secret_but_the_snapshot_never_holds_it(
    team, secrets_key, inspect_cli, make_git_repo
):
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": RECIPE})
    team.repository.url = str(upstream.path)
    team.repository.save()
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, out + err
    from snapshots.models import Snapshot
    from snapshots.restore import restore_sandbox

    snapshot = Snapshot.objects.get(repository=team.repository)
    assert snapshot.state == Snapshot.State.READY, snapshot.error
    assert "setup got [redacted]" in snapshot.log and TOKEN not in snapshot.log
    assert TOKEN not in out + err
    assert _tree_holds(snapshot, b"# w\n"), "the search must look at the snapshot's files"
    assert _tree_holds(snapshot, TOKEN.encode()) == []
    # start succeeds only if it sees the token; the agent's own commands do not see it.
    restored = restore_sandbox(team.repository, snapshot=snapshot)
    try:
        assert restored.sandbox.read_file("token-length") == f"{len(TOKEN)}\n".encode()
        env = restored.sandbox.run("echo ${DEPLOY_TOKEN:-unset}", cwd="/workspace")
        assert env.stdout.strip() == "unset"
    finally:
        restored.sandbox.terminate()


def test_a_build_needing_secrets_without_a_key_fails_saying_so(
    team, secrets_key, inspect_cli, make_git_repo
):
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": RECIPE})
    team.repository.url = str(upstream.path)
    team.repository.save()
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    settings.SECRETS_KEY = ""
    inspect_cli("snapshot", "refresh", "widgets", "--json")
    from snapshots.models import Snapshot

    snapshot = Snapshot.objects.get(repository=team.repository)
    assert snapshot.state == Snapshot.State.FAILED
    assert "INSPECT_SECRETS_KEY is not set" in snapshot.error
