"""Changing which models a repository's agents may use (Repository.allowed_models: names, or
prefixes ending in *; empty: any): repository admins, audited. The gateway enforces the list
(gateway/policy.py)."""

from __future__ import annotations

import re

from django.db import transaction

from accounts import access, roles
from approvals import audit
from snapshots.models import Repository

MAX_MODELS = 100
MAX_NAME = 200
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
