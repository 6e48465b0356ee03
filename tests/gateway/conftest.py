"""Fixtures of the gateway's tests."""

from tests.gateway.budget_fixtures import (  # noqa: F401 - budgets: admit, pages, CLI
    admin_is_site_admin,
    turn,
)
