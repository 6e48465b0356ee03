"""Attack: use the recipe's `refresh` step (incremental refresh) to get more than `setup` gets.

`refresh` commands run where `setup` did, on top of the previous snapshot: they must see exactly
the environment `setup` sees (the repository's secrets, no token of an agent turn, no model
key), with the same egress (the approved allowlist, refusals in the build log), and their secret
values must stay out of the log and out of the layer the refresh adds."""

from __future__ import annotations

import json
import secrets as random

import pytest
from cryptography.fernet import Fernet
from django.conf import settings

from approvals.secrets import secret_set
from snapshots.backends import sandbox_backend
from snapshots.models import Snapshot
from snapshots.sandbox import SnapshotRef

pytestmark = pytest.mark.django_db

TOKEN = "tok-" + random.token_hex(16)
AGENT_TOKEN = "npm-" + random.token_hex(16)
# localhost is on the allowlist but resolves to loopback: the proxy refuses it, and says so.
FETCH = (
    'env -u no_proxy -u NO_PROXY python3 -c "import urllib.request as u\n'
    "try: u.urlopen('http://localhost/', timeout=10)\n"
    "except Exception as e: print('fetch failed:', e)\""
)


def step(name: str) -> list[str]:
    """Commands that record what `name` (setup or refresh) gets: its environment's names, a
    digest of every value, and what its egress does."""
    return [
        f"env | cut -d= -f1 | grep -v '^_$' | sort > {name}-env-names",
        f"env | sort | sha256sum | cut -c1-16 > {name}-env-digest",
        f"echo {name} got $DEPLOY_TOKEN and $NPM_TOKEN",
        FETCH,
    ]


@pytest.fixture
def secrets_key(settings):
    settings.SECRETS_KEY = Fernet.generate_key().decode()
    return settings.SECRETS_KEY


@pytest.fixture
def widgets(make_git_repo, team, secrets_key):
    toml = (
        f"setup = {json.dumps(step('setup'))}\n"
        f"refresh = {json.dumps(step('refresh'))}\n"
        'egress = { mode = "allowlist", domains = ["localhost"] }\n'
    )
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": toml})
    team.repository.url = str(upstream.path)
    team.repository.approved_egress = {"mode": "allowlist", "domains": ["localhost"]}
    team.repository.save()
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    secret_set(
        repository=team.repository,
        name="NPM_TOKEN",
        value=AGENT_TOKEN,
        scope="agent",
        by=team.admin,
    )
    team.repository.upstream = upstream
    return team.repository


def refresh(inspect_cli) -> Snapshot:
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    data = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and data["state"] == "ready", (data, err)
    assert TOKEN not in out + err and AGENT_TOKEN not in out + err
    return Snapshot.objects.get(pk=data["id"])


def test_the_refresh_step_gets_what_setup_gets_and_no_more(inspect_cli, widgets):
    assert settings.SECRETS_KEY
    full = refresh(inspect_cli)
    widgets.upstream.commit({"src/new.py": "x = 1\n"})
    stacked = refresh(inspect_cli)
    assert stacked.kind == "incremental", stacked.log

    # The same environment, names and values (setup and refresh each ran once).
    backend = sandbox_backend()
    sandbox = backend.create(snapshot=SnapshotRef.parse(stacked.backend_ref))
    try:
        read = lambda path: sandbox.read_file(path).decode()  # noqa: E731
        assert read("refresh-env-names") == read("setup-env-names")
        names = read("setup-env-names").split()
        assert "DEPLOY_TOKEN" in names and "NPM_TOKEN" in names  # setup gets every secret
        assert not [n for n in names if "GATEWAY" in n or n.endswith("_API_KEY")], names
        assert read("refresh-env-digest") == read("setup-env-digest")
    finally:
        sandbox.terminate()

    # Secret values are redacted from both logs; the same egress refused the same request.
    assert "setup got [redacted] and [redacted]" in full.log
    assert "refresh got [redacted] and [redacted]" in stacked.log
    for snapshot in (full, stacked):
        assert TOKEN not in snapshot.log and AGENT_TOKEN not in snapshot.log
        assert "egress refused: localhost:80 (resolves to 127.0.0.1" in snapshot.log, snapshot.log
    assert stacked.egress == full.egress == {"mode": "allowlist", "domains": ["localhost"]}

    # Nothing of the secrets in the layer the refresh added.
    top = backend.snapshot_layers(SnapshotRef.parse(stacked.backend_ref))[-1]
    for path in backend.store.layer_path(top).rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert TOKEN.encode() not in data and AGENT_TOKEN.encode() not in data, path
