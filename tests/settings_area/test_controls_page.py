"""The approvals-and-egress page: the policy through `inspect policy set`'s action; egress
written into the dashboard recipe through `inspect recipe set`'s action (wider waits for a
reviewer, narrower applies at once)."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals import gate
from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEntry
from approvals.policy import policy_for
from snapshots.build import snapshot_build
from snapshots.egress import recipe_override_set

pytestmark = pytest.mark.django_db

URL = "/settings/repositories/widgets/controls/"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_access_admin_engineer_and_non_member(team):
    assert _client(team.admin).get(URL).status_code == 200
    assert _client(team.engineer).get(URL).status_code == 403
    assert _client(team.engineer).post(URL + "policy/", {"text": ""}).status_code == 403
    assert _client(team.outsider).get(URL).status_code == 404
    assert _client(team.outsider).post(URL + "egress/", {"mode": "open"}).status_code == 404
    assert not ApprovalRequest.objects.exists() and not ApprovalPolicy.objects.exists()


def test_the_default_policy_is_shown_and_a_new_one_saved_and_audited(team):
    client = _client(team.admin)
    page = client.get(URL).content.decode()
    assert "the default is in force" in page and "merge_pr, push_protected" in page
    text = 'require = ["merge_pr"]\nprotected_branches = ["main", "release/*"]\n'
    assert client.post(URL + "policy/", {"text": text}).status_code == 302
    # It drops gated actions and `master`: a loosening, applied once another reviewer approves.
    pending = ApprovalRequest.objects.get(action="loosen_policy")
    page = client.get(URL).content.decode()
    assert "the default is in force" in page and f"/approvals/{pending.pk}/" in page
    gate.approval_decide(approval=pending, user=team.reviewer, approve=True)
    gate.execute_approval(pending.pk)
    assert policy_for(team.repository).require == ("merge_pr",)
    assert AuditEntry.objects.filter(action="policy.change", actor=team.admin).exists()
    page = client.get(URL).content.decode()
    assert "release/*" in page and "the default is in force" not in page


def test_a_bad_policy_says_why_and_saves_nothing(team):
    response = _client(team.admin).post(URL + "policy/", {"text": "expire_hours = 0\n"})
    assert response.status_code == 400
    assert (
        "&#x27;expire_hours&#x27; must be a whole number from 1 to 2160"
        in response.content.decode()
    )
    assert not ApprovalPolicy.objects.exists()


def test_widening_egress_files_a_request_and_changes_nothing_yet(team):
    team.repository.recipe_override = 'setup = ["make"]\n'
    team.repository.save()
    response = _client(team.admin).post(
        URL + "egress/", {"mode": "allowlist", "domains": "pkgs.example.org\n"}, follow=True
    )
    assert "approval request" in response.content.decode()
    team.repository.refresh_from_db()
    assert team.repository.approved_network.mode == "none"
    assert team.repository.recipe_override == 'setup = ["make"]\n'
    pending = ApprovalRequest.objects.get(action="widen_egress")
    assert pending.requested_by == team.admin
    assert (
        'mode = "allowlist", domains = ["pkgs.example.org"]' in pending.payload["recipe_override"]
    )
    assert f'href="/approvals/{pending.pk}/"' in _client(team.admin).get(URL).content.decode()


def test_narrowing_applies_at_once_and_keeps_the_rest_of_the_recipe(team):
    team.repository.approved_egress = {"mode": "open", "domains": []}
    team.repository.recipe_override = (
        'setup = ["make"]  # kept\negress = { mode = "open" }\n[preview]\n'
        'command = "serve"\nurl = "http://127.0.0.1:8000/"\n'
    )
    team.repository.save()
    response = _client(team.admin).post(URL + "egress/", {"mode": "none", "domains": ""})
    assert response.status_code == 302
    team.repository.refresh_from_db()
    assert team.repository.approved_network.mode == "none"
    assert team.repository.recipe_override.startswith('setup = ["make"]  # kept\negress = {')
    assert "[preview]" in team.repository.recipe_override
    assert AuditEntry.objects.filter(action="repository.egress", actor=team.admin).exists()


def test_without_an_override_the_file_is_copied_into_it(team, make_git_repo):
    upstream = make_git_repo(files={".inspect/environment.toml": 'setup = ["echo file-setup"]\n'})
    team.repository.url = str(upstream.path)
    team.repository.save()
    client = _client(team.admin)
    refused = client.post(URL + "egress/", {"mode": "none"})
    assert refused.status_code == 400 and "not fetched yet" in refused.content.decode()
    snapshot_build(team.repository)
    assert client.post(URL + "egress/", {"mode": "none"}).status_code == 302
    team.repository.refresh_from_db()
    assert (
        team.repository.recipe_override
        == 'setup = ["echo file-setup"]\negress = { mode = "none" }\n'
    )


def test_a_bad_domain_says_why(team):
    response = _client(team.admin).post(
        URL + "egress/", {"mode": "allowlist", "domains": "not a domain!"}
    )
    assert response.status_code == 400
    assert not ApprovalRequest.objects.exists()


def test_pending_requests_from_the_cli_show_on_the_page(team):
    pending = recipe_override_set(
        repository=team.repository, text='egress = { mode = "open" }\n', by=team.admin
    )
    page = _client(team.admin).get(URL).content.decode()
    assert f'Approval request <a href="/approvals/{pending.pk}/">{pending.pk}</a>' in page
    assert "asked by admin" in page
