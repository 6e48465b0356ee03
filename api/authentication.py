"""DRF authentication by `Authorization: Bearer insp_…` (and its OpenAPI description)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from api.tokens import bearer_token, token_authenticate


class TokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        raw = bearer_token(header)
        if not raw:
            raise exceptions.AuthenticationFailed(
                "send the token as `Authorization: Bearer insp_…`"
            )
        token = token_authenticate(raw)
        if token is None:
            raise exceptions.AuthenticationFailed(
                "this API token is unknown, revoked or expired; create a new one on your "
                "account's API tokens page"
            )
        return token.user, token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'  # makes DRF answer 401, not 403, without credentials


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "api.authentication.TokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "insp_…"}
