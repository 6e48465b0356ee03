"""The budgets page (/budgets/), a repository's allowed models page, and their command line:
what an admin sees and changes, the errors shown in the form, and the audit entry per change."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from approvals.models import AuditEntry
from gateway.models import Budget
from tests.gateway.budget_fixtures import spend

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_page_lists_budgets_with_spend_and_what_is_left(client, team, turn):
    Budget.objects.create(scope="user", period="day", user=team.engineer, limit_usd=Decimal(5))
    Budget.objects.create(scope="site", period="month", limit_usd=Decimal(100))
    spend(turn, 1.25)
    client.force_login(team.admin)
    page = client.get("/budgets/").content.decode()
    assert "The daily budget of user engineer" in page
    assert "The site&#x27;s monthly budget" in page
    assert "$1.25 (25%)" in page and "$3.75" in page  # spent and left of the user's
    assert "$98.75" in page  # left of the site's
    assert 'href="/budgets/"' in page  # the nav link, for admins


def test_an_admin_creates_changes_and_removes_a_budget_each_audited(client, team):
    client.force_login(team.admin)
    form = {"scope": "repository", "target": "widgets", "period": "month", "limit_usd": "$40"}
    response = client.post("/budgets/", form, **HTMX)
    assert response.status_code == 200
    budget = Budget.objects.get(scope="repository", repository=team.repository)
    assert budget.limit_usd == Decimal(40) and budget.updated_by == team.admin
    assert "The monthly budget of repository widgets" in response.content.decode()

    response = client.post(f"/budgets/{budget.pk}/", {"limit_usd": "55.5"}, **HTMX)
    assert response.status_code == 200
    assert Budget.objects.get(pk=budget.pk).limit_usd == Decimal("55.5")

    response = client.post(f"/budgets/{budget.pk}/delete/", **HTMX)
    assert response.status_code == 200 and not Budget.objects.exists()
    entries = AuditEntry.objects.filter(object_type="budget").order_by("seq")
    assert [e.action for e in entries] == ["budget.create", "budget.change", "budget.delete"]
    assert [e.actor_name for e in entries] == ["admin"] * 3
    assert entries[1].data["before_usd"] == "40.0000" and entries[1].data["after_usd"] == "55.5000"
    assert entries[0].repository_name == "widgets"


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"scope": "user", "target": "nobody", "period": "day", "limit_usd": "5"},
         "No user named &#x27;nobody&#x27;."),
        ({"scope": "user", "target": "", "period": "day", "limit_usd": "5"}, "Name the user."),
        ({"scope": "site", "target": "widgets", "period": "day", "limit_usd": "5"},
         "leave the target empty"),
        ({"scope": "user", "target": "engineer", "period": "day", "limit_usd": "lots"},
         "must be a number of dollars"),
        ({"scope": "user", "target": "engineer", "period": "day", "limit_usd": "-1"},
         "zero or more dollars"),
        ({"scope": "user", "target": "engineer", "period": "week", "limit_usd": "1"},
         "day or month"),
        ({"scope": "team", "target": "engineer", "period": "day", "limit_usd": "1"},
         "user, repository or site"),
    ],
)  # fmt: skip
def test_bad_input_is_shown_in_the_form_and_nothing_is_saved(client, team, form, message):
    client.force_login(team.admin)
    response = client.post("/budgets/", form, **HTMX)
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page and 'role="alert"' in page
    assert f'value="{form["target"]}"' in page  # what was typed stays in the form
    assert not Budget.objects.exists()
    assert not AuditEntry.objects.filter(object_type="budget").exists()


def test_a_bad_limit_on_a_row_is_shown_on_that_row(client, team):
    budget = Budget.objects.create(scope="site", period="day", limit_usd=Decimal(5))
    client.force_login(team.admin)
    response = client.post(f"/budgets/{budget.pk}/", {"limit_usd": "1e999999"}, **HTMX)
    assert response.status_code == 400
    assert "at most $10,000,000" in response.content.decode()
    assert Budget.objects.get(pk=budget.pk).limit_usd == Decimal(5)


def test_setting_an_existing_budget_again_changes_its_limit(client, team):
    client.force_login(team.admin)
    form = {"scope": "site", "target": "", "period": "day", "limit_usd": "5"}
    client.post("/budgets/", form)
    response = client.post("/budgets/", {**form, "limit_usd": "7"})
    assert response.status_code == 302
    assert list(Budget.objects.values_list("limit_usd", flat=True)) == [Decimal(7)]


def test_a_repository_admin_sets_its_allowed_models_audited(client, team):
    client.force_login(team.admin)
    url = "/repositories/widgets/models/"
    assert "Every model is allowed" not in client.get(url).content.decode()  # the form instead
    response = client.post(
        url, {"models": "claude-sonnet-4-5\ngpt-4.1*, claude-sonnet-4-5"}, **HTMX
    )
    assert response.status_code == 200 and "Saved" in response.content.decode()
    team.repository.refresh_from_db()
    assert team.repository.allowed_models == ["claude-sonnet-4-5", "gpt-4.1*"]
    entry = AuditEntry.objects.get(action="repository.allowed_models")
    assert entry.data == {"before": [], "after": ["claude-sonnet-4-5", "gpt-4.1*"]}
    assert entry.repository_name == "widgets"

    response = client.post(url, {"models": "gpt 4; drop table"}, **HTMX)
    assert response.status_code == 400 and "is not a model name" in response.content.decode()
    team.repository.refresh_from_db()
    assert team.repository.allowed_models == ["claude-sonnet-4-5", "gpt-4.1*"]


def test_a_member_sees_the_list_read_only(client, team):
    team.repository.allowed_models = ["gpt-4.1"]
    team.repository.save()
    client.force_login(team.engineer)
    page = client.get("/repositories/widgets/models/").content.decode()
    assert "<code>gpt-4.1</code>" in page and "<textarea" not in page


def test_the_command_line_sets_lists_and_removes_budgets(team, turn, capsys):
    call_command("inspect", "budget", "set", "user", "engineer", "--period", "day", "--limit", "3")
    call_command("inspect", "budget", "set", "site", "--period", "month", "--limit", "50")
    spend(turn, 1)
    call_command("inspect", "budget", "list")
    out = capsys.readouterr().out
    assert "the daily budget of user engineer: $3.00, spent $1.00, left $2.00" in out
    assert "the site's monthly budget: $50.00" in out
    call_command("inspect", "budget", "list", "--json")
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"]: r["left_usd"] for r in rows}["the daily budget of user engineer"] == 2.0
    call_command("inspect", "budget", "remove", "user", "engineer", "--period", "day")
    assert list(Budget.objects.values_list("scope", flat=True)) == ["site"]
    with pytest.raises(CommandError, match="has no day budget"):
        call_command("inspect", "budget", "remove", "user", "engineer", "--period", "day")
    with pytest.raises(CommandError, match="must be a number of dollars"):
        call_command("inspect", "budget", "set", "site", "--period", "day", "--limit", "ten")
    actions = AuditEntry.objects.filter(object_type="budget").values_list("action", flat=True)
    assert list(actions.order_by("seq")) == ["budget.create", "budget.create", "budget.delete"]


def test_the_command_line_shows_and_sets_allowed_models(team, capsys):
    call_command("inspect", "models", "widgets")
    assert "widgets may use every model" in capsys.readouterr().out
    call_command("inspect", "models", "widgets", "--allow", "gpt-4.1", "claude-*")
    assert "widgets may use: gpt-4.1, claude-*" in capsys.readouterr().out
    with pytest.raises(CommandError, match="is not a model name.*unchanged"):
        call_command("inspect", "models", "widgets", "--allow", "bad name!")
    call_command("inspect", "models", "widgets", "--any")
    team.repository.refresh_from_db()
    assert team.repository.allowed_models == []


def test_the_snapshots_page_links_each_repository_to_its_models(client, team):
    team.repository.allowed_models = ["gpt-4.1", "claude-*"]
    team.repository.save()
    client.force_login(team.engineer)
    page = client.get("/snapshots/").content.decode()
    assert "Models its agents may use: gpt-4.1, claude-*" in page
    assert 'href="/repositories/widgets/models/"' in page
