"""Fixtures for the Models settings: no provider configured by the environment, the run-time
settings' cache emptied around each test, and the stand-in model as the provider."""

from __future__ import annotations

import pytest

from inspect_web import site_settings
from tests.standin_model import StandinModel

GOOD_KEY = "sk-ant-standin-good-key-5f0e"
WRONG_KEY = "sk-ant-wrong-key-9d1c"


@pytest.fixture
def no_provider_env(settings):
    """Nothing set by the environment, so the Models page's values are the ones in force."""
    settings.LLM_API_KEY = settings.ANTHROPIC_API_KEY = settings.LLM_MODEL = ""
    settings.LLM_BASE_URL = "https://api.openai.com/v1"
    settings.ANTHROPIC_BASE_URL = "https://api.anthropic.com"
    settings.LLM_PROVIDER = "auto"
    site_settings.forget()
    yield settings
    site_settings.forget()  # a rolled-back test's values must not linger in the cache


@pytest.fixture
def provider():
    """The stand-in model, accepting GOOD_KEY only (401 in each provider's shape otherwise)."""
    with StandinModel(key=GOOD_KEY) as model:
        yield model


@pytest.fixture
def site_admin(team):
    team.admin.refresh_from_db()  # the team fixture made it a superuser with an update()
    return team.admin
