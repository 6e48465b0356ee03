"""Attack: widen a sandbox's egress by committing it to the repository's own recipe.

Only the dashboard override used to be gated; a snapshot build applied the file's `egress` as is.
Now the egress in force is the last approved policy (`none` for a repository that never had one
approved): a build whose recipe widens it keeps the old policy, files one `widen_egress`
request and says so in its log and on the Snapshots page; approval queues a rebuild.
"""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from approvals import gate
from approvals.models import ApprovalRequest
from inspect_web.redis_client import get_redis
from snapshots.egress import recipe_override_set
from snapshots.models import Snapshot
from snapshots.restore import restore_sandbox

pytestmark = pytest.mark.django_db

RECIPE = ".inspect/environment.toml"
OPEN = 'setup = ["echo built"]\negress = { mode = "open" }\n'
ALLOW_A = 'setup = ["echo built"]\negress = { mode = "allowlist", domains = ["a.example.org"] }\n'
ALLOW_AB = (
    'setup = ["echo built"]\n'
    'egress = { mode = "allowlist", domains = ["a.example.org", "evil.example.org"] }\n'
)


@pytest.fixture
def widgets(make_git_repo, team):
    """The team's repository, pointing at a real upstream git repository on disk."""
    upstream = make_git_repo(files={"README.md": "# widgets\n", RECIPE: 'setup = ["true"]\n'})
    team.repository.url = str(upstream.path)
    team.repository.save()
    team.repository.upstream = upstream
    return team.repository


def refresh(inspect_cli, repository) -> Snapshot:
    code, out, err = inspect_cli("snapshot", "refresh", repository.name, "--json")
    data = json.loads(out.strip().splitlines()[-1])
    assert data["state"] == "ready", (data, err)
    return Snapshot.objects.get(pk=data["id"])


def session_egress(repository) -> dict:
    """The egress of a session's sandbox, as the backend records it."""
    restored = restore_sandbox(repository)
    try:
        return restored.sandbox.state["network"]
    finally:
        restored.sandbox.terminate()


def queued_refreshes(repository) -> int:
    """Refresh tasks for `repository` waiting in the Celery broker (the real queue)."""
    count = 0
    for raw in get_redis().lrange("celery", 0, -1):
        message = json.loads(raw)
        headers = message.get("headers", {})
        if headers.get("task") == "snapshots.tasks.refresh_snapshot" and headers.get(
            "argsrepr", ""
        ).startswith(f"({repository.pk},"):
            count += 1
    return count


def approve(approval, reviewer, django_capture_on_commit_callbacks) -> None:
    gate.approval_decide(approval=approval, user=reviewer, approve=True)
    get_redis().delete("celery")
    with django_capture_on_commit_callbacks(execute=True):
        assert gate.execute_approval(approval.pk) == ApprovalRequest.State.EXECUTED


def test_a_committed_open_egress_waits_for_a_reviewer(
    inspect_cli, widgets, team, client, django_capture_on_commit_callbacks
):
    first = refresh(inspect_cli, widgets)
    assert first.egress == {"mode": "none", "domains": []}

    widgets.upstream.commit({RECIPE: OPEN}, "open the network")
    held = refresh(inspect_cli, widgets)
    assert held.egress == {"mode": "none", "domains": []}
    assert "asks for egress open" in held.log
    assert "stays none until a reviewer approves" in held.log
    assert session_egress(widgets)["mode"] == "none"
    pending = ApprovalRequest.objects.get(action="widen_egress", repository=widgets)
    assert pending.state == "pending"
    assert "none → open" in gate.summary(pending)
    assert f"request {pending.pk}" in held.log

    # Refreshing again (the beat does, every 30 minutes) files no second request.
    again = refresh(inspect_cli, widgets)
    assert again.egress["mode"] == "none"
    assert ApprovalRequest.objects.filter(action="widen_egress").count() == 1

    client.force_login(team.engineer)
    page = client.get(reverse("snapshots:list")).content.decode()
    assert "Egress in force" in page and "asks for open" in page
    assert f"approval {pending.pk}" in page
    detail = client.get(held.get_absolute_url()).content.decode()
    assert "<dt>Egress</dt><dd>none (the approved egress" in detail

    approve(pending, team.reviewer, django_capture_on_commit_callbacks)
    assert queued_refreshes(widgets) == 1
    get_redis().delete("celery")
    widened = refresh(inspect_cli, widgets)
    assert widened.egress == {"mode": "open", "domains": []}
    assert session_egress(widgets)["mode"] == "open"


def test_a_new_allowlist_domain_waits_too_even_on_a_fresh_repository(
    inspect_cli, widgets, team, django_capture_on_commit_callbacks
):
    # No policy was ever approved: `none` is the baseline, so an allowlist needs approval.
    widgets.upstream.commit({RECIPE: ALLOW_A}, "allow a")
    held = refresh(inspect_cli, widgets)
    assert held.egress["mode"] == "none"
    assert session_egress(widgets)["mode"] == "none"
    first = ApprovalRequest.objects.get(action="widen_egress", state="pending")
    approve(first, team.reviewer, django_capture_on_commit_callbacks)
    allowed = refresh(inspect_cli, widgets)
    assert allowed.egress == {"mode": "allowlist", "domains": ["a.example.org"]}

    widgets.upstream.commit({RECIPE: ALLOW_AB}, "allow evil too")
    held = refresh(inspect_cli, widgets)
    assert held.egress == {"mode": "allowlist", "domains": ["a.example.org"]}
    assert session_egress(widgets)["domains"] == ["a.example.org"]
    assert "evil.example.org" in held.log and "stays allowlist" in held.log
    second = ApprovalRequest.objects.get(action="widen_egress", state="pending")
    assert second.pk != first.pk


def test_the_requester_cannot_approve_a_widening_and_narrowing_applies_at_once(
    inspect_cli, widgets, team, django_capture_on_commit_callbacks
):
    pending = recipe_override_set(repository=widgets, text=OPEN, by=team.admin)
    with pytest.raises(PermissionDenied):
        gate.approval_decide(approval=pending, user=team.admin, approve=True)
    approve(pending, team.reviewer, django_capture_on_commit_callbacks)
    assert queued_refreshes(widgets) == 1
    assert refresh(inspect_cli, widgets).egress["mode"] == "open"

    # Clearing the override narrows egress (the file says nothing: none): at once, no rebuild.
    assert recipe_override_set(repository=widgets, text="", by=team.admin) is None
    assert session_egress(widgets)["mode"] == "none"
    assert refresh(inspect_cli, widgets).egress["mode"] == "none"
    # Then the file cannot widen it back by itself.
    widgets.upstream.commit({RECIPE: OPEN}, "open again")
    assert refresh(inspect_cli, widgets).egress["mode"] == "none"
    assert ApprovalRequest.objects.filter(action="widen_egress", state="pending").count() == 1


def test_a_branch_that_asks_for_less_narrows_only_its_own_build(inspect_cli, widgets):
    widgets.approved_egress = {"mode": "allowlist", "domains": ["a.example.org"]}
    widgets.save()
    widgets.upstream.git("checkout", "--quiet", "-b", "quiet")
    widgets.upstream.commit({RECIPE: 'setup = ["echo quiet"]\n'}, "no network here")
    _, out, err = inspect_cli("snapshot", "refresh", "widgets", "--branch", "quiet", "--json")
    branch = Snapshot.objects.get(pk=json.loads(out.strip().splitlines()[-1])["id"])
    assert branch.egress["mode"] == "none", err
    assert "narrows egress to none on this branch" in branch.log
    widgets.refresh_from_db()
    assert widgets.approved_network.domains == ("a.example.org",)


def test_whoever_committed_the_recipe_cannot_approve_its_widening(
    inspect_cli, widgets, team, django_capture_on_commit_callbacks
):
    """The reviewer who wrote the commit that widens the recipe (matched by a verified e-mail
    address of theirs: the test repository's commits are by ada@example.com) approving it
    themselves is the author approving their own change."""
    team.reviewer.email = "Ada@example.com"  # set by an administrator: counts as verified
    team.reviewer.save()
    widgets.upstream.commit({RECIPE: OPEN}, "open the network")
    refresh(inspect_cli, widgets)
    pending = ApprovalRequest.objects.get(action="widen_egress", state="pending")
    with pytest.raises(PermissionDenied, match="committed the recipe"):
        gate.approval_decide(approval=pending, user=team.reviewer, approve=True)
    approve(pending, team.admin, django_capture_on_commit_callbacks)
    assert refresh(inspect_cli, widgets).egress["mode"] == "open"
