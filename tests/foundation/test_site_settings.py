"""Run-time settings: the environment wins over the settings page, secrets are sealed at rest."""

from __future__ import annotations

import pytest

from inspect_web import site_settings
from inspect_web.models import SiteSetting

NAME = "TEST_SITE_SECRET"
site_settings.declare(NAME, label="A test secret", secret=True)


@pytest.fixture(autouse=True)
def fresh_cache():
    site_settings.forget()
    yield
    site_settings.forget()


@pytest.mark.django_db
def test_stored_secret_is_sealed_and_read_back(settings):
    assert site_settings.in_force(NAME).source == site_settings.DEFAULT
    site_settings.store(NAME, "sk-very-secret-value")
    raw = SiteSetting.objects.get(name=NAME).value
    assert "sk-very-secret-value" not in raw and raw.startswith("fernet:")
    assert site_settings.in_force(NAME) == site_settings.InForce(
        "sk-very-secret-value", site_settings.SETTINGS_PAGE
    )
    site_settings.store(NAME, "")
    assert not SiteSetting.objects.filter(name=NAME).exists()


@pytest.mark.django_db
def test_environment_wins(settings):
    site_settings.store(NAME, "from-the-page")
    setattr(settings, NAME, "from-the-environment")
    assert site_settings.in_force(NAME) == site_settings.InForce(
        "from-the-environment", site_settings.ENVIRONMENT
    )
