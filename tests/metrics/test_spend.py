"""Model spend on the Metrics page (every runtime's requests through the gateway, by user,
repository, runtime and model, this UTC day or month) and cost per merged PR with sandbox
minutes at INSPECT_SANDBOX_USD_PER_MINUTE."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gateway.budgets import period_start
from metrics.queries import metrics_report
from metrics.spend import spend_report
from tests.gateway.budget_fixtures import spend
from tests.metrics.conftest import NOW
from tests.metrics.test_figures import END, START

pytestmark = pytest.mark.django_db


@pytest.fixture
def requests(team):
    """widgets: the engineer's Claude Code and Codex turns, the reviewer's built-in agent;
    gadgets: the outsider's; and a widgets request of last month, outside this month."""
    w, g = team.repository, team.other_repository
    spend(None, 1.0, user=team.engineer, repository=w, runtime="claude_code",
          model="claude-sonnet-4-5", input_tokens=1000, output_tokens=100)  # fmt: skip
    spend(None, 0.5, user=team.engineer, repository=w, runtime="codex", model="gpt-4.1",
          input_tokens=400, output_tokens=40)  # fmt: skip
    spend(None, 0.25, user=team.reviewer, repository=w, runtime="builtin",
          model="claude-sonnet-4-5")  # fmt: skip
    spend(None, None, user=team.reviewer, repository=w, runtime="opencode", model="local-llm")
    spend(None, 9.0, user=team.outsider, repository=g, runtime="codex", model="gpt-4.1")
    spend(None, 50.0, user=team.engineer, repository=w, runtime="codex", model="gpt-4.1",
          created_at=period_start("month") - timedelta(seconds=1))  # fmt: skip


def lines(report, group):
    return {line.label: (line.usd, line.requests) for key, _, ls in report.groups if key == group
            for line in ls}  # fmt: skip


def test_spend_by_user_repository_runtime_and_model_this_month(team, requests):
    report = spend_report([team.repository], "month")
    assert report.total_usd == pytest.approx(1.75) and report.requests == 4
    assert lines(report, "user") == {"engineer": (1.5, 2), "reviewer": (0.25, 2)}
    assert lines(report, "repository") == {"widgets": (1.75, 4)}
    assert lines(report, "runtime") == {
        "claude_code": (1.0, 1), "codex": (0.5, 1), "builtin": (0.25, 1), "opencode": (0.0, 1),
    }  # fmt: skip
    assert lines(report, "model") == {
        "claude-sonnet-4-5": (1.25, 2), "gpt-4.1": (0.5, 1), "local-llm": (0.0, 1),
    }  # fmt: skip
    both = spend_report([team.repository, team.other_repository], "month")
    assert both.total_usd == pytest.approx(10.75)


def test_the_fragment_shows_a_manager_their_repositories_only(client, team, requests):
    client.force_login(team.manager)
    page = client.get("/metrics/spend/").content.decode()
    assert "$1.75" in page and "claude_code" in page and "engineer" in page
    assert "outsider" not in page and "$9.00" not in page and "$10.75" not in page
    assert client.get("/metrics/spend/?repository=gadgets").status_code == 404
    assert client.get("/metrics/spend/?period=week").status_code == 400
    assert 'id="metrics-spend-box"' in client.get("/metrics/").content.decode()


def test_an_engineer_gets_no_spend_figures(client, team, requests):
    client.force_login(team.engineer)
    page = client.get("/metrics/spend/").content.decode()
    assert "$1.75" not in page and "No model requests" in page  # no repository to cover
    assert client.get("/metrics/spend/?repository=widgets").status_code == 403


def test_cost_per_merged_pr_counts_sandbox_minutes_at_the_configured_rate(team, world, settings):
    settings.SANDBOX_USD_PER_MINUTE = 0.02
    total = metrics_report(
        repositories=[team.repository], period="week", start=START, end=END, now=NOW
    ).total
    # $8 of model requests (Session.cost_usd: every runtime's, the gateway adds to it) and
    # 51 sandbox minutes at $0.02, over 2 merged PRs.
    assert total.sandbox_cost_usd == pytest.approx(1.02)
    assert total.cost_per_merged == pytest.approx((8.0 + 1.02) / 2)
