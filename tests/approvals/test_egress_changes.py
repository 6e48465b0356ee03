"""Egress: a widening change waits for approval and is audited; the allowlist is enforced by
a real sandbox against two local HTTP servers (an allowed name and a denied one)."""

from __future__ import annotations

import pytest

from approvals import gate
from approvals.models import ApprovalRequest, AuditEntry
from snapshots.egress import recipe_override_set, widens
from snapshots.restore import current_recipe
from snapshots.sandbox import NetworkPolicy
from tests.nethosts import net_host

ALLOWLIST = 'egress = { mode = "allowlist", domains = ["allowed.test"] }\n'
FETCH = (
    'python3 -c "import urllib.request as u, urllib.error as e\n'
    "try: print('OK', u.urlopen('{url}', timeout=5).read().decode())\n"
    "except e.HTTPError as x: print('HTTP', x.code, x.read().decode())\n"
    "except Exception as x: print('ERR', x)\""
)


@pytest.mark.parametrize(
    ("before", "after", "wider"),
    [
        (NetworkPolicy("none"), NetworkPolicy("allowlist", ("a.test",)), True),
        (NetworkPolicy("allowlist", ("a.test",)), NetworkPolicy("open"), True),
        (NetworkPolicy("allowlist", ("a.test",)), NetworkPolicy("allowlist", ("b.test",)), True),
        (NetworkPolicy("allowlist", ("a.test",)), NetworkPolicy("allowlist", ("x.a.test",)), False),
        (NetworkPolicy("open"), NetworkPolicy("none"), False),
    ],
)
def test_what_counts_as_widening(before, after, wider):
    assert widens(before, after) is wider


def test_widening_egress_waits_for_a_reviewer(team):
    pending = recipe_override_set(repository=team.repository, text=ALLOWLIST, by=team.admin)
    assert pending.action == "widen_egress" and pending.state == "pending"
    assert "none → allowlist (allowed.test)" in gate.summary(pending)
    team.repository.refresh_from_db()
    assert current_recipe(team.repository).egress.mode == "none"
    gate.approval_decide(approval=pending, user=team.reviewer, approve=True)
    assert gate.execute_approval(pending.pk) == ApprovalRequest.State.EXECUTED
    team.repository.refresh_from_db()
    assert current_recipe(team.repository).egress.domains == ("allowed.test",)
    change = AuditEntry.objects.get(action="repository.recipe")
    assert change.data["egress_after"] == "allowlist (allowed.test)"
    assert change.data["approval"] == pending.pk


def test_narrowing_applies_at_once_and_is_audited(team):
    team.repository.recipe_override = 'egress = { mode = "open" }\n'
    team.repository.approved_egress = {"mode": "open", "domains": []}  # as approved earlier
    team.repository.save()
    assert recipe_override_set(repository=team.repository, text=ALLOWLIST, by=team.admin) is None
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == ALLOWLIST
    assert AuditEntry.objects.get(action="repository.recipe").data["egress_before"] == "open"
    assert team.repository.approved_network == NetworkPolicy("allowlist", ("allowed.test",))
    narrowed = AuditEntry.objects.get(action="repository.egress")
    assert narrowed.data["egress_after"] == "allowlist (allowed.test)"


def test_an_approval_overtaken_by_another_change_fails_with_the_reason(team):
    pending = recipe_override_set(repository=team.repository, text=ALLOWLIST, by=team.admin)
    recipe_override_set(repository=team.repository, text='setup = ["true"]\n', by=team.admin)
    gate.approval_decide(approval=pending, user=team.reviewer, approve=True)
    assert gate.execute_approval(pending.pk) == ApprovalRequest.State.FAILED
    pending.refresh_from_db()
    assert "recipe changed after this request" in pending.result["error"]


@pytest.fixture
def two_servers():
    """Two web servers in network namespaces on public-looking addresses (the proxy refuses
    loopback and private ones): (allowed address, denied address)."""
    with (
        net_host("a", "198.18.0", port=80, banner="allowed service") as allowed,
        net_host("d", "198.18.1", port=80, banner="denied service") as denied,
    ):
        yield allowed.address, denied.address


def test_the_repositorys_allowlist_is_enforced_in_a_real_sandbox(team, two_servers, tmp_path):
    from django.conf import settings

    from snapshots.sandbox.local import LocalBackend

    allowed_address, denied_address = two_servers
    recipe_override_set(repository=team.repository, text=ALLOWLIST, by=team.admin)
    approval = ApprovalRequest.objects.get()
    gate.approval_decide(approval=approval, user=team.reviewer, approve=True)
    gate.execute_approval(approval.pk)
    team.repository.refresh_from_db()
    policy = current_recipe(team.repository).egress
    # Both names lead to a server that answers, so only the policy tells them apart.
    backend = LocalBackend(
        root=settings.SANDBOX_ROOT,
        egress_hosts={"allowed.test": allowed_address, "denied.test": denied_address},
    )
    (tmp_path / "ws").mkdir()
    ref = backend.snapshot_from_directory(str(tmp_path / "ws"))
    sandbox = backend.create(snapshot=ref, network=policy)
    try:
        ok = sandbox.run(FETCH.format(url="http://allowed.test/"))
        assert "OK allowed service" in ok.stdout, ok.stdout + ok.stderr
        refused = sandbox.run(FETCH.format(url="http://denied.test/"))
        assert "HTTP 403" in refused.stdout and "not on the allowlist" in refused.stdout
        assert "denied service" not in refused.stdout
        direct = sandbox.run(FETCH.format(url=f"http://{denied_address}/"))
        assert "denied service" not in direct.stdout
    finally:
        sandbox.terminate()
        backend.delete_snapshot(ref)
