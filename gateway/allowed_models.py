"""Changing which models a repository's agents may use (Repository.allowed_models: names, or
prefixes ending in *; empty: any) and the model its new sessions use when they name none
(Repository.default_model): repository admins, audited. The gateway enforces the list
(gateway/policy.py); the default must be one the list allows."""

from __future__ import annotations

import re

from django.db import transaction

from accounts import access, roles
from approvals import audit
from gateway.policy import model_allowed
from snapshots.models import Repository

MAX_MODELS = 100
MAX_NAME = 200
DEFAULT_MODEL_MAX = 100  # Repository.default_model, as Session.model
# A model name as the providers spell them ("claude-sonnet-4-5", "gpt-4.1-mini",
# "accounts/fireworks/models/x", "llama3:8b"), or a prefix of one ending in "*".
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*\*?$")


class ModelListError(ValueError):
    """A list of models that cannot be saved; the message says which entry and why."""


def parse_model_list(text: str | list[str]) -> list[str]:
    """Entries from a list or from text (one per line, or separated by commas or spaces),
    deduplicated in order. ModelListError names the first bad entry."""
    items = text if isinstance(text, list) else re.split(r"[\s,]+", text or "")
    models: list[str] = []
    for raw in items:
        name = raw.strip()
        if not name or name in models:
            continue
        if len(name) > MAX_NAME:
            raise ModelListError(f"{name[:40]}… is longer than {MAX_NAME} characters.")
        if not NAME.match(name):
            raise ModelListError(
                f"{name!r} is not a model name: use letters, digits and . _ : / @ + -, "
                "with an optional * at the end for a prefix (claude-sonnet-*)."
            )
        models.append(name)
    if len(models) > MAX_MODELS:
        raise ModelListError(f"At most {MAX_MODELS} entries.")
    return models


def allowed_models_set(*, repository: Repository, models: str | list[str], by) -> list[str]:
    """Replace the repository's list (MANAGE_REPOSITORY needed: PermissionDenied otherwise;
    ModelListError for a bad entry, nothing changed). Audited with the old and new list."""
    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    new = parse_model_list(models)
    with transaction.atomic():
        locked = Repository.objects.select_for_update().get(pk=repository.pk)
        before = list(locked.allowed_models or [])
        if locked.default_model and not model_allowed(locked.default_model, new):
            raise ModelListError(
                f"The list leaves out {locked.default_model}, the repository's default model; "
                "add it, or change the default first."
            )
        locked.allowed_models = new
        locked.save(update_fields=["allowed_models"])
        audit.record(
            "repository.allowed_models",
            actor=by,
            repository=locked,
            object_type="repository",
            object_id=locked.pk,
            data={"before": before, "after": new},
        )
    repository.allowed_models = new
    return new


def default_model_set(*, repository: Repository, model: str, by) -> str:
    """Set the model new sessions of `repository` use when they name none ('' : the runtime's
    configured default). MANAGE_REPOSITORY needed; ModelListError when it is not a model name
    or the repository's allowed models leave it out (nothing changed). Audited."""
    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    model = (model or "").strip()
    if model and (len(model) > DEFAULT_MODEL_MAX or not NAME.match(model) or "*" in model):
        raise ModelListError(
            f"{model[:60]!r} is not a model name: use letters, digits and . _ : / @ + - "
            f"(at most {DEFAULT_MODEL_MAX} characters, no *)."
        )
    with transaction.atomic():
        locked = Repository.objects.select_for_update().get(pk=repository.pk)
        allowed = list(locked.allowed_models or [])
        if model and not model_allowed(model, allowed):
            raise ModelListError(
                f"{model} is not among the models {locked.name} allows ({', '.join(allowed)}); "
                "allow it first."
            )
        before = locked.default_model
        locked.default_model = model
        locked.save(update_fields=["default_model"])
        audit.record(
            "repository.default_model",
            actor=by,
            repository=locked,
            object_type="repository",
            object_id=locked.pk,
            data={"before": before, "after": model},
        )
    repository.default_model = model
    return model
