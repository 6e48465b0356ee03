"""Model policy: which models a repository's agents may use (`Repository.allowed_models`:
names, or prefixes ending in `*`; empty allows any). A request for another model is refused
with the list of the allowed ones, before anything reaches the provider."""

from __future__ import annotations

from gateway.budgets import Refusal
from gateway.models import ModelRequest
from sessions.models import ModelAccess


def model_allowed(model: str, allowed: list[str]) -> bool:
    if not allowed:
        return True
    for pattern in allowed:
        if pattern.endswith("*") and model.startswith(pattern[:-1]):
            return True
        if model == pattern:
            return True
    return False


def check(access: ModelAccess, model: str) -> Refusal | None:
    """None when `access`'s repository may use `model`; else a 403 naming the allowed models."""
    setting = access.repository.allowed_models or []
    if not isinstance(setting, list) or not all(isinstance(m, str) for m in setting):
        return Refusal(
            status=403,
            kind="permission_error",
            message=(
                f"repository {access.repository.name}'s allowed models are not a list of model "
                f"names ({setting!r}); an admin of the repository must correct them"
            ),
            outcome=ModelRequest.Outcome.REFUSED_POLICY,
        )
    allowed = list(setting)
    if model_allowed(model, allowed):
        return None
    return Refusal(
        status=403,
        kind="permission_error",
        message=(
            f"model {model!r} is not allowed for repository {access.repository.name}; "
            f"allowed models: {', '.join(allowed)}"
        ),
        outcome=ModelRequest.Outcome.REFUSED_POLICY,
    )
