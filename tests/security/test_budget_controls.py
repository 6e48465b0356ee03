"""Attacks on the spending limits: an engineer whose turn is paused tries to raise their own
budget, or to widen their repository's models, through the pages, an API token, the gateway
token and the command line. Only site admins set budgets; only repository admins set models."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from api.tokens import token_create
from approvals.models import AuditEntry
from gateway.models import Budget
from sessions import model_access
from sessions.models import Prompt, Session

pytestmark = pytest.mark.django_db

RAISE = {"scope": "user", "target": "engineer", "period": "day", "limit_usd": "1000000"}


@pytest.fixture
def own_budget(team):
    return Budget.objects.create(
        scope="user", period="day", user=team.engineer, limit_usd=Decimal(1)
    )


def unchanged(budget) -> bool:
    budget.refresh_from_db()
    return (
        budget.limit_usd == Decimal(1)
        and not AuditEntry.objects.filter(object_type="budget").exists()
    )


@pytest.mark.parametrize("who", ["engineer", "reviewer", "manager", "outsider"])
def test_a_non_admin_can_neither_see_nor_change_budgets(client, team, own_budget, who):
    user = getattr(team, who)  # outsider: an admin of *another* repository, not of the site
    client.force_login(user)
    page = client.get("/budgets/")
    assert page.status_code == 403
    assert b"engineer" not in page.content.split(b"<main")[1]  # no budget is shown
    assert b"Only site admins set budgets" in page.content
    assert client.post("/budgets/", RAISE).status_code == 403
    assert client.post("/budgets/", {**RAISE, "scope": "site", "target": ""}).status_code == 403
    pk = own_budget.pk
    assert client.post(f"/budgets/{pk}/", {"limit_usd": "1000000"}).status_code == 404
    assert client.post(f"/budgets/{pk}/delete/").status_code == 404
    assert client.post("/budgets/", RAISE, HTTP_HX_REQUEST="true").status_code == 403
    assert unchanged(own_budget) and Budget.objects.count() == 1
    assert b'href="/budgets/"' not in client.get("/sessions/").content  # no nav link


def test_an_api_token_or_the_turns_gateway_token_is_no_way_in(team, own_budget):
    api_token = token_create(user=team.engineer, name="mine")[1]
    session = Session.objects.create(repository=team.repository, creator=team.engineer, title="t")
    prompt = Prompt.objects.create(session=session, author=team.engineer, text="go", order=1)
    gateway_token = model_access.mint(session, prompt, "claude_code")
    for token in (api_token, gateway_token):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        assert api.post("/api/budgets/", RAISE).status_code == 404  # no such endpoint
        # The pages take a browser login only: a bearer token is nobody there.
        response = api.post("/budgets/", RAISE)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
        response = api.post(f"/budgets/{own_budget.pk}/", {"limit_usd": "1000000"})
        assert response.status_code == 302
    assert unchanged(own_budget)


def test_the_command_line_refuses_an_engineer_acting_as_themselves(team, own_budget):
    with pytest.raises(CommandError, match="Only site admins"):
        call_command("inspect", "budget", "set", "user", "engineer", "--period", "day",
                     "--limit", "1000000", "--as", "engineer")  # fmt: skip
    with pytest.raises(CommandError, match="Only site admins"):
        call_command("inspect", "budget", "remove", "user", "engineer", "--period", "day",
                     "--as", "engineer")  # fmt: skip
    with pytest.raises(CommandError, match="Only site admins"):  # not even whether it exists
        call_command("inspect", "budget", "remove", "site", "--period", "month",
                     "--as", "engineer")  # fmt: skip
    assert unchanged(own_budget)


def test_only_a_repository_admin_changes_its_allowed_models(team):
    team.repository.allowed_models = ["claude-haiku-4-5"]
    team.repository.save()
    url = "/repositories/widgets/models/"
    for who, status in (("engineer", 403), ("manager", 403), ("outsider", 404)):
        client = Client()
        client.force_login(getattr(team, who))
        assert client.post(url, {"models": ""}).status_code == status, who
        assert client.post(url, {"models": "*"}, HTTP_HX_REQUEST="true").status_code == status
    with pytest.raises(CommandError, match="does not allow this"):
        call_command("inspect", "models", "widgets", "--any", "--as", "engineer")
    team.repository.refresh_from_db()
    assert team.repository.allowed_models == ["claude-haiku-4-5"]
    assert not AuditEntry.objects.filter(action="repository.allowed_models").exists()


def test_another_repositorys_admin_cannot_set_this_repositorys_models_or_budget(team):
    with pytest.raises(CommandError):
        call_command("inspect", "models", "widgets", "--any", "--as", "outsider")
    with pytest.raises(CommandError, match="Only site admins"):
        call_command("inspect", "budget", "set", "repository", "gadgets", "--period", "month",
                     "--limit", "1", "--as", "outsider")  # fmt: skip
    assert not Budget.objects.exists()
