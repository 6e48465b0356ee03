"""A request the sandbox's egress policy refuses is visible where people look: a line in the
snapshot's build log, an ``egress_refused`` event in the session."""

import json

import pytest

from sessions.models import Event
from snapshots.models import Snapshot

pytestmark = pytest.mark.django_db

# localhost is on the allowlist but resolves to loopback: the proxy must refuse it (the
# sandbox's NO_PROXY would keep urllib from asking the proxy at all; an attacker drops it).
FETCH = (
    'env -u no_proxy -u NO_PROXY python3 -c "import urllib.request as u\n'
    "try: u.urlopen('http://localhost/', timeout=10)\n"
    "except Exception as e: print('fetch failed:', e)\""
)


def test_refusals_reach_the_build_log_and_the_session_events(
    inspect_cli, make_git_repo, team, create_session
):
    toml = (
        f"setup = {json.dumps([FETCH])}\n"
        'egress = { mode = "allowlist", domains = ["localhost"] }\n'
    )
    upstream = make_git_repo(files={"README.md": "# widgets\n", ".inspect/environment.toml": toml})
    team.repository.url = str(upstream.path)
    # The allowlist was approved (widening through the recipe waits for a reviewer otherwise).
    team.repository.approved_egress = {"mode": "allowlist", "domains": ["localhost"]}
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    snapshot = Snapshot.objects.filter(repository=team.repository).latest("pk")
    assert "egress refused: localhost:80 (resolves to 127.0.0.1" in snapshot.log, snapshot.log

    code, summary, err = create_session("--prompt", "fetch", "--agent-command", FETCH, "--inline")
    assert code == 0, err
    refused = [
        e.payload for e in Event.objects.filter(session_id=summary["id"], kind="egress_refused")
    ]
    assert [(r["host"], r["port"]) for r in refused] == [("localhost", 80)], refused
    assert "loopback" in refused[0]["reason"] and refused[0]["turn"] == 1
