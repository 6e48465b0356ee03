"""API tokens: hashed at rest, shown once, revocable, expiring."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from api.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_token_authenticates_its_user_and_is_stored_only_as_a_hash(team, token_for):
    raw = token_for(team.engineer, name="laptop")
    row = ApiToken.objects.get(user=team.engineer)
    assert raw.startswith("insp_") and len(raw) > 40
    assert raw not in {row.token_hash, row.prefix} and raw.startswith(row.prefix)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.get("/api/me/")
    assert response.status_code == 200
    assert response.json()["username"] == "engineer"
    assert response.json()["token_name"] == "laptop"
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_no_wrong_revoked_or_expired_token_gets_401_with_a_reason(team, token_for):
    client = APIClient()
    response = client.get("/api/sessions/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    client.credentials(HTTP_AUTHORIZATION="Bearer insp_not-a-real-token")
    response = client.get("/api/sessions/")
    assert response.status_code == 401
    assert "unknown, revoked or expired" in response.json()["detail"]

    raw = token_for(team.engineer)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/sessions/").status_code == 200
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/sessions/").status_code == 401
    ApiToken.objects.update(
        expires_at=timezone.now() + timedelta(days=1), revoked_at=timezone.now()
    )
    assert client.get("/api/sessions/").status_code == 401


def test_the_tokens_page_shows_a_new_token_once_and_revokes_it(client, team):
    client.force_login(team.engineer)
    response = client.post("/account/tokens/", {"name": "ci", "expires_in_days": "30"})
    assert response.status_code == 200
    raw = response.context["new_token"]
    assert raw in response.content.decode()
    again = client.get("/account/tokens/").content.decode()
    assert raw not in again and "ci" in again and raw[:11] in again
    token = ApiToken.objects.get(name="ci")
    assert abs((token.expires_at - timezone.now()) - timedelta(days=30)) < timedelta(minutes=1)

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/me/").status_code == 200
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 302
    assert api.get("/api/me/").status_code == 401


def test_a_token_needs_a_name_and_a_known_expiry(client, team):
    client.force_login(team.engineer)
    response = client.post("/account/tokens/", {"name": " ", "expires_in_days": "30"})
    assert response.status_code == 400
    assert "give the token a name" in response.content.decode()
    response = client.post("/account/tokens/", {"name": "x", "expires_in_days": "9999"})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_nobody_can_revoke_someone_elses_token(client, team, token_for):
    token_for(team.engineer)
    token = ApiToken.objects.get()
    client.force_login(team.admin)
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
