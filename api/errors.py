"""Every API error is `{"detail": "<one line a person can act on>", "fields": {...}?}`."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from drf_spectacular.openapi import AutoSchema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from approvals.gate import ApprovalError
from sessions.services import SessionError
from snapshots.repositories import RepositoryRefused


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    fields = serializers.DictField(
        required=False, child=serializers.ListField(child=serializers.CharField())
    )


def _flatten(detail, path: str = "") -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            out.update(_flatten(value, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(detail, list) and detail and not all(isinstance(d, str) for d in detail):
        out = {}
        for i, value in enumerate(detail):
            out.update(_flatten(value, f"{path}[{i}]"))
        return out
    items = detail if isinstance(detail, list) else [detail]
    return {path or "request": [str(d) for d in items]}


def exception_handler(exc, context):
    # Django's PermissionDenied carries the reason (access.require_repo_permission); DRF's
    # default handler would replace it with a generic sentence.
    if isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, SessionError | ApprovalError):
        exc = exceptions.ValidationError(str(exc))
    elif isinstance(exc, RepositoryRefused):
        exc = exceptions.ValidationError({exc.field: [str(exc)]})
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        summary = "; ".join(
            f"{k}: {' '.join(v)}" if k != "request" else " ".join(v) for k, v in fields.items()
        )
        body = {"detail": summary or "the request is not valid"}
        if set(fields) != {"request"}:
            body["fields"] = fields
        return Response(body, status=response.status_code, headers=_headers(response))
    detail = response.data.get("detail") if isinstance(response.data, dict) else response.data
    return Response(
        {"detail": str(detail)}, status=response.status_code, headers=_headers(response)
    )


def _headers(response) -> dict[str, str]:
    return {k: v for k, v in response.items() if k in {"WWW-Authenticate", "Retry-After", "Allow"}}


class ApiSchema(AutoSchema):
    """Every operation documents the error shape for the statuses it can answer with."""

    ERRORS = {
        "400": "Bad input; `detail` says what to change.",
        "401": "No token, or an unknown, revoked or expired one.",
        "403": "Your role on the repository does not allow this.",
        "404": "No such object, or you are not a member of its repository.",
    }

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response" or not self.view.__module__.startswith("api."):
            return responses
        for code, description in self.ERRORS.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code)
                responses[code]["description"] = description
        return responses
