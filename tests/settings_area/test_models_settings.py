"""The Models settings: provider accounts on the site page (site admins), their Test button
against the stand-in provider, and a repository's default model, allowed models and budgets on
its Models tab; the CLI through the same actions."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from approvals.models import AuditEntry
from gateway.models import Budget
from inspect_web.models import SiteSetting
from sessions.agents import provider_accounts as accounts
from sessions.services import session_create
from tests.settings_area import provider_fixtures as fixtures
from tests.settings_area.provider_fixtures import GOOD_KEY, WRONG_KEY

no_provider_env, provider, site_admin = (
    fixtures.no_provider_env, fixtures.provider, fixtures.site_admin
)  # fmt: skip

pytestmark = pytest.mark.django_db
PAGE = "/settings/models/"
REPO_PAGE = "/settings/repositories/widgets/models/"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _account(kind: str) -> accounts.Account:
    return next(a for a in accounts.accounts() if a.kind == kind)


def test_a_key_set_on_the_page_is_sealed_shown_by_its_last_four_and_audited(
    no_provider_env, site_admin, provider
):
    client = _client(site_admin)
    response = client.post(
        PAGE, {"action": "set", "kind": "anthropic", "key": GOOD_KEY, "base_url": provider.url}
    )
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert GOOD_KEY not in page
    assert "ending …5f0e" in page and "from the settings page" in page
    assert provider.url in page and "Saved." in page
    stored = SiteSetting.objects.get(name="ANTHROPIC_API_KEY").value
    assert stored.startswith("fernet:") and GOOD_KEY not in stored
    assert (accounts.anthropic_key(), accounts.anthropic_base_url()) == (GOOD_KEY, provider.url)
    entry = AuditEntry.objects.get(action="model_provider.set")
    assert entry.data == {"kind": "anthropic", "key": "replaced", "base_url": provider.url}
    assert GOOD_KEY not in str(entry.data) and entry.actor_id == site_admin.pk


def test_the_test_button_says_ok_or_shows_the_providers_refusal(
    no_provider_env, site_admin, provider
):
    client = _client(site_admin)
    client.post(
        PAGE, {"action": "set", "kind": "anthropic", "key": GOOD_KEY, "base_url": provider.url}
    )
    page = client.post(PAGE, {"action": "test", "kind": "anthropic"}).content.decode()
    assert f"OK: {provider.url} accepted the key: " in page
    sent = provider.requests[-1]
    assert sent.path == "/v1/models" and sent.headers["x-api-key"] == GOOD_KEY

    client.post(PAGE, {"action": "set", "kind": "anthropic", "key": WRONG_KEY})  # URL kept
    page = client.post(PAGE, {"action": "test", "kind": "anthropic"}).content.decode()
    assert "Refused: 401: invalid x-api-key" in page and WRONG_KEY not in page

    # An OpenAI-compatible server: the provider's own message, whatever it says.
    client.post(
        PAGE,
        {"action": "set", "kind": "compatible", "key": WRONG_KEY, "base_url": provider.openai_url},
    )
    page = client.post(PAGE, {"action": "test", "kind": "compatible"}).content.decode()
    assert "Refused: 401: Incorrect API key provided: sk-****9d1c" in page
    tests = AuditEntry.objects.filter(action="model_provider.test").order_by("seq")
    assert [(e.data["ok"], e.data["status"]) for e in tests] == [
        (True, 200), (False, 401), (False, 401)
    ]  # fmt: skip


def test_a_server_that_needs_no_key_answered_and_no_key_is_claimed(no_provider_env, site_admin):
    """A local OpenAI-compatible server (Ollama, vLLM) is connected without a key: Test says
    it answered, not that it "accepted the key" no one gave."""
    from tests.standin_model import StandinModel  # why: only this test serves a keyless model

    client = _client(site_admin)
    with StandinModel(key=None) as local:
        client.post(PAGE, {"action": "set", "kind": "compatible", "base_url": local.openai_url})
        page = client.post(PAGE, {"action": "test", "kind": "compatible"}).content.decode()
        assert "authorization" not in {name.lower() for name in local.requests[-1].headers}
    assert f"OK: {local.openai_url} answered: " in page and "accepted the key" not in page


def test_an_unreachable_provider_is_named(no_provider_env, site_admin):
    client = _client(site_admin)
    client.post(PAGE, {"action": "set", "kind": "compatible", "base_url": "http://127.0.0.1:9/v1"})
    page = client.post(PAGE, {"action": "test", "kind": "compatible"}).content.decode()
    assert "Refused: the model provider at http://127.0.0.1:9/v1 could not be reached" in page


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"kind": "openai", "key": ""}, "Paste the OpenAI API key."),
        ({"kind": "anthropic", "key": "sk-ant with space"}, "spaces, line breaks"),
        ({"kind": "compatible", "base_url": ""}, "needs its base URL"),
        ({"kind": "compatible", "base_url": "ftp://models.example"}, "is not an http(s) URL"),
        ({"kind": "compatible", "base_url": "http://u:p@h.example/v1"}, "without a user name"),
        ({"kind": "compatible", "base_url": "https://api.openai.com/v1"}, "OpenAI's own API"),
        ({"kind": "nonsense", "key": "k"}, "is not a kind of provider account"),
    ],
)
def test_bad_input_is_shown_on_the_form_and_nothing_is_saved(
    no_provider_env, site_admin, form, message
):
    response = _client(site_admin).post(PAGE, {"action": "set", **form})
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not SiteSetting.objects.exists()
    assert not AuditEntry.objects.filter(action__startswith="model_provider").exists()


def test_the_environment_wins_and_the_page_says_so(no_provider_env, site_admin):
    no_provider_env.ANTHROPIC_API_KEY = "sk-ant-from-the-environment-77aa"
    client = _client(site_admin)
    page = client.get(PAGE).content.decode()
    assert "ending …77aa" in page and "from the environment" in page
    assert "sk-ant-from-the-environment" not in page
    refused = client.post(PAGE, {"action": "set", "kind": "anthropic", "key": GOOD_KEY})
    assert refused.status_code == 400
    assert "ANTHROPIC_API_KEY is set in the platform" in refused.content.decode()
    removed = client.post(PAGE, {"action": "remove", "kind": "anthropic"})
    assert removed.status_code == 400 and "comes from the platform" in removed.content.decode()
    # OpenAI's key from the environment is never sent to a server named on this page.
    no_provider_env.LLM_API_KEY = "sk-openai-from-the-environment-1234"
    refused = client.post(
        PAGE, {"action": "set", "kind": "compatible", "base_url": "http://10.0.0.9:8000/v1"}
    )
    assert refused.status_code == 400 and "INSPECT_LLM_API_KEY is set in the platform" in (
        refused.content.decode()
    )
    assert not SiteSetting.objects.exists()


def test_openai_and_a_compatible_server_share_one_route_and_never_share_a_key(
    no_provider_env, site_admin
):
    client = _client(site_admin)
    client.post(PAGE, {"action": "set", "kind": "openai", "key": "sk-openai-key-0000aaaa"})
    assert _account("openai").configured and not _account("compatible").configured
    client.post(
        PAGE, {"action": "set", "kind": "compatible", "base_url": "http://127.0.0.1:11434/v1/"}
    )
    assert (accounts.openai_base_url(), accounts.openai_key()) == ("http://127.0.0.1:11434/v1", "")
    assert _account("compatible").configured and not _account("openai").configured
    client.post(PAGE, {"action": "remove", "kind": "compatible"})
    assert accounts.openai_base_url() == accounts.OPENAI_BASE_URL
    assert not SiteSetting.objects.exists()
    actions = AuditEntry.objects.filter(object_type="model_provider").order_by("seq")
    assert [e.action for e in actions] == [
        "model_provider.set", "model_provider.set", "model_provider.remove"
    ]  # fmt: skip


def test_only_a_site_admin_opens_the_models_page(no_provider_env, team):
    for who in ("engineer", "manager", "outsider"):  # outsider: admin of another repository
        client = _client(getattr(team, who))
        assert client.get(PAGE).status_code == 403, who
        refused = client.post(PAGE, {"action": "set", "kind": "openai", "key": "sk-x-123456789"})
        assert refused.status_code == 403, who
    assert not SiteSetting.objects.exists()
    assert Client().get(PAGE).status_code == 302  # to the login page


def test_the_site_default_model(no_provider_env, site_admin):
    client = _client(site_admin)
    assert client.post(PAGE, {"action": "default_model", "model": "bad model"}).status_code == 400
    client.post(PAGE, {"action": "default_model", "model": "qwen2.5-coder:7b"})
    assert accounts.default_model() == "qwen2.5-coder:7b"
    entry = AuditEntry.objects.get(action="model_provider.default_model")
    assert entry.data == {"before": "", "after": "qwen2.5-coder:7b"}


def test_the_repository_models_tab_sets_the_default_the_list_and_budgets(
    no_provider_env, team, site_admin
):
    client = _client(site_admin)
    assert client.get(REPO_PAGE).status_code == 200
    saved = client.post(REPO_PAGE, {"action": "default_model", "model": "claude-sonnet-4-5"})
    assert saved.status_code == 302
    team.repository.refresh_from_db()
    assert team.repository.default_model == "claude-sonnet-4-5"
    refused = client.post(REPO_PAGE, {"action": "allowed", "models": "gpt-4.1*"})
    assert refused.status_code == 400 and "leaves out claude-sonnet-4-5" in refused.content.decode()
    client.post(REPO_PAGE, {"action": "allowed", "models": "claude-*\ngpt-4.1*"})
    refused = client.post(REPO_PAGE, {"action": "default_model", "model": "o3"})
    assert refused.status_code == 400 and "is not among the models" in refused.content.decode()
    team.repository.refresh_from_db()
    assert (team.repository.default_model, team.repository.allowed_models) == (
        "claude-sonnet-4-5", ["claude-*", "gpt-4.1*"]
    )  # fmt: skip
    bad = client.post(REPO_PAGE, {"action": "budget_set", "period": "month", "limit_usd": "-1"})
    assert bad.status_code == 400 and not Budget.objects.exists()
    client.post(REPO_PAGE, {"action": "budget_set", "period": "month", "limit_usd": "250"})
    budget = Budget.objects.get()
    assert (budget.scope, budget.repository_id, budget.limit_usd) == (
        "repository", team.repository.pk, Decimal(250)
    )  # fmt: skip
    assert "$250" in client.get(REPO_PAGE).content.decode()
    client.post(REPO_PAGE, {"action": "budget_remove", "period": "month"})
    assert not Budget.objects.exists()
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"repository.default_model", "repository.allowed_models", "budget.create",
            "budget.delete"} <= actions  # fmt: skip


def test_a_repository_admin_sees_its_budgets_but_only_a_site_admin_sets_them(team):
    Budget.objects.create(
        scope="repository", period="day", repository=team.other_repository, limit_usd=5
    )
    client = _client(team.outsider)  # admin of gadgets, not a site admin
    page = client.get("/settings/repositories/gadgets/models/").content.decode()
    assert "$5" in page and "Only a site admin sets budgets" in page and "Set budget" not in page
    refused = client.post(
        "/settings/repositories/gadgets/models/",
        {"action": "budget_set", "period": "day", "limit_usd": "500"},
    )
    assert refused.status_code == 403
    assert Budget.objects.get().limit_usd == Decimal(5)
    assert (
        client.post(
            "/settings/repositories/gadgets/models/",
            {"action": "default_model", "model": "gpt-4.1"},
        ).status_code
        == 302
    )  # its own repository's models are its to set


def test_the_repository_tab_refuses_an_engineer_and_hides_from_a_non_member(team):
    refused = _client(team.engineer).get(REPO_PAGE)
    assert refused.status_code == 403 and b"ask one of its admins" in refused.content
    assert _client(team.outsider).get(REPO_PAGE).status_code == 404
    assert (
        _client(team.outsider)
        .post(REPO_PAGE, {"action": "default_model", "model": "x"})
        .status_code
        == 404
    )
    team.repository.refresh_from_db()
    assert team.repository.default_model == ""


def test_the_old_models_page_sends_admins_to_the_tab_and_still_shows_members_the_list(team):
    assert _client(team.admin).get("/repositories/widgets/models/")["Location"] == REPO_PAGE
    team.repository.allowed_models = ["gpt-4.1"]
    team.repository.save()
    page = _client(team.engineer).get("/repositories/widgets/models/").content.decode()
    assert "<code>gpt-4.1</code>" in page


def test_new_sessions_use_the_repository_default_model(no_provider_env, team):
    no_provider_env.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # a local server: builtin needs no key
    team.repository.default_model = "qwen2.5-coder:7b"
    team.repository.save()
    common = {"repository": team.repository, "creator": team.engineer, "prompt": "go"}
    assert session_create(agent="builtin", **common).model == "qwen2.5-coder:7b"
    assert session_create(agent="builtin", model="llama3:8b", **common).model == "llama3:8b"
    assert session_create(agent="command", agent_command="true", **common).model == ""


def test_the_command_line_sets_tests_lists_and_removes_a_provider(
    no_provider_env, site_admin, provider, capsys, monkeypatch
):
    monkeypatch.setenv("STANDIN_KEY", GOOD_KEY)
    call_command(
        "inspect", "models", "provider", "set", "anthropic", "--key-env", "STANDIN_KEY",
        "--base-url", provider.url,
    )  # fmt: skip
    assert "anthropic: saved (audited)" in capsys.readouterr().out
    call_command("inspect", "models", "provider", "list")
    out = capsys.readouterr().out
    assert f"anthropic: connected: key …5f0e from the settings page; {provider.url}" in out
    assert GOOD_KEY not in out
    call_command("inspect", "models", "provider", "test", "anthropic")
    assert "anthropic: OK:" in capsys.readouterr().out
    monkeypatch.setenv("STANDIN_KEY", WRONG_KEY)
    call_command("inspect", "models", "provider", "set", "anthropic", "--key-env", "STANDIN_KEY")
    with pytest.raises(CommandError, match="refused: 401: invalid x-api-key"):
        call_command("inspect", "models", "provider", "test", "anthropic")
    with pytest.raises(CommandError, match="Only a site admin"):
        call_command("inspect", "models", "provider", "remove", "anthropic", "--as", "engineer")
    call_command("inspect", "models", "provider", "remove", "anthropic")
    assert not SiteSetting.objects.exists()
    with pytest.raises(CommandError, match="No OpenAI-compatible server account to test"):
        call_command("inspect", "models", "provider", "test", "compatible")


def test_the_command_line_sets_a_repository_default_model(team, capsys):
    call_command("inspect", "models", "widgets", "--default", "gpt-4.1")
    assert "widgets's default model: gpt-4.1" in capsys.readouterr().out
    with pytest.raises(CommandError, match="is not a model name.*unchanged"):
        call_command("inspect", "models", "widgets", "--default", "gpt-4.*")
    with pytest.raises(CommandError, match="does not allow this"):
        call_command("inspect", "models", "widgets", "--default", "o3", "--as", "engineer")
    team.repository.refresh_from_db()
    assert team.repository.default_model == "gpt-4.1"


def test_the_new_task_form_names_and_preselects_the_repository_default_model(team):
    team.repository.default_model = "claude-sonnet-4-5"
    team.repository.save()
    page = _client(team.engineer).get("/sessions/new/").content.decode()  # widgets only
    assert "Defaults: widgets: claude-sonnet-4-5." in page
    assert 'name="model" value="claude-sonnet-4-5"' in page
