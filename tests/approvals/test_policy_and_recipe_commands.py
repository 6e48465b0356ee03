"""`inspect policy` and `inspect recipe` from the shell: the same rules as the services — a
policy that does not parse is refused, a recipe that widens egress waits for a reviewer."""

from __future__ import annotations

from approvals import gate
from approvals.models import ApprovalPolicy, ApprovalRequest, AuditEntry

OPEN = 'egress = { mode = "open" }\n'


def test_the_default_policy_is_shown_until_one_is_set(team, inspect_cli, tmp_path):
    code, out, _ = inspect_cli("policy", "show", "widgets")
    assert code == 0 and "has no policy of its own" in out
    assert 'require = ["merge_pr", "push_protected", "widen_egress", "delete_branch"]' in out

    policy = tmp_path / "policy.toml"
    policy.write_text('require = ["merge_pr"]\nirreversible_commands = ["deploy*"]\n')
    code, out, err = inspect_cli("policy", "set", "widgets", "--file", str(policy))
    # It drops gated actions, so it waits for another reviewer (the loosening rule).
    assert code == 0 and "waiting for a reviewer other than you" in out, err
    assert "has no policy of its own" in inspect_cli("policy", "show", "widgets")[1]
    pending = ApprovalRequest.objects.get(action="loosen_policy")
    gate.approval_decide(approval=pending, user=team.reviewer, approve=True)
    gate.execute_approval(pending.pk)
    assert inspect_cli("policy", "show", "widgets")[1].strip() == policy.read_text().strip()
    policy.write_text('require = ["merge_pr", "open_pr"]\nirreversible_commands = ["deploy*"]\n')
    code, out, err = inspect_cli("policy", "set", "widgets", "--file", str(policy))
    assert code == 0 and "saved (audited)" in out, err  # a tightening applies at once
    assert inspect_cli("policy", "show", "widgets")[1].strip() == policy.read_text().strip()
    assert {e.actor_name for e in AuditEntry.objects.filter(action="policy.change")} == {"admin"}


def test_a_policy_that_does_not_parse_is_refused_saying_where(team, inspect_cli, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text("require = [\n")
    code, _, err = inspect_cli("policy", "set", "widgets", "--file", str(policy))
    assert code == 1 and "does not parse" in err and "policy of widgets is unchanged" in err
    code, _, err = inspect_cli(
        "policy", "set", "widgets", "--file", str(policy), "--as", "engineer"
    )
    assert code == 1
    assert not ApprovalPolicy.objects.exists()


def test_opening_egress_from_the_shell_waits_for_another_reviewer(team, inspect_cli, tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(OPEN)
    code, out, err = inspect_cli("recipe", "set", "widgets", "--file", str(recipe))
    assert code == 0, err
    pending = ApprovalRequest.objects.get(action="widen_egress")
    assert f"approval {pending.pk} is pending" in out and "none → open" in out
    assert "egress in force: none" in inspect_cli("recipe", "show", "widgets")[1]

    # The admin asked, so the admin may not approve; the reviewer may.
    code, _, err = inspect_cli("approval", "decide", str(pending.pk), "approve")
    assert code == 1 and "another reviewer has to decide it" in err
    code, out, _ = inspect_cli("approval", "decide", str(pending.pk), "approve", "--as", "reviewer")
    assert code == 0 and "is approved" in out
    assert gate.execute_approval(pending.pk) == ApprovalRequest.State.EXECUTED
    assert "egress in force: open" in inspect_cli("recipe", "show", "widgets")[1]


def test_narrowing_applies_at_once_and_a_bad_recipe_is_refused(team, inspect_cli, tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('setup = ["true"]\n')
    code, out, _ = inspect_cli("recipe", "set", "widgets", "--file", str(recipe))
    assert code == 0 and "saved (audited)" in out
    recipe.write_text("egress = 'everywhere'\n")
    code, _, err = inspect_cli("recipe", "set", "widgets", "--file", str(recipe))
    assert code == 1 and "recipe of widgets is unchanged" in err
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == 'setup = ["true"]\n'
    assert team.repository.approved_network.mode == "none"


def test_the_admin_site_shows_the_recipe_but_cannot_widen_egress_around_the_gate(team, client):
    team.repository.recipe_override = 'setup = ["true"]\n'
    team.repository.save()
    client.force_login(team.admin)  # a superuser
    url = f"/admin/snapshots/repository/{team.repository.pk}/change/"
    page = client.get(url).content.decode()
    assert "setup = [&quot;true&quot;]" in page and 'name="recipe_override"' not in page
    client.post(
        url,
        {
            "name": "widgets",
            "url": team.repository.url,
            "default_branch": "main",
            "refresh_minutes": 30,
            "recipe_override": OPEN,
            "approved_egress": '{"mode": "open"}',
            "memberships-TOTAL_FORMS": 0,
            "memberships-INITIAL_FORMS": 0,
        },
    )
    team.repository.refresh_from_db()
    assert team.repository.recipe_override == 'setup = ["true"]\n'
    assert team.repository.approved_network.mode == "none"
