"""Repository secrets: encrypted at rest, given only to the commands allowed to see them, and
scrubbed from everything stored.

Values are Fernet-encrypted with INSPECT_SECRETS_KEY (inspect_web.sealing). A secret reaches a
command only as an environment variable of that one exec — `setup` (snapshot build) and `start`
(every restore) always, the agent's commands only when its scope is `agent` — never the
sandbox's own environment or a file, so a snapshot never holds it. Every event before its
insert (sessions.controls) and the build log replace each value with "[redacted]"
(`secret_values`, approvals.redaction).
"""

from __future__ import annotations

import logging
import threading
import time

from cryptography.fernet import InvalidToken
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts import access, roles
from approvals import audit
from approvals.models import RepositorySecret
from approvals.redaction import MIN_SECRET_LENGTH, Redactor
from inspect_web.sealing import SecretsUnavailable, fernet

log = logging.getLogger(__name__)

Scope = RepositorySecret.Scope
CACHE_SECONDS = 2.0
_cache: dict[int, tuple[float, list[str]]] = {}
_cache_lock = threading.Lock()


def secret_set(*, repository, name: str, value: str, scope: str = Scope.SETUP_START, by) -> None:
    """Create or replace a secret (MANAGE_REPOSITORY needed). The value is audited never; the
    change (name, scope, who) is."""
    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    if scope not in Scope.values:
        raise ValidationError(f"scope must be one of {', '.join(Scope.values)}")
    if len(value) < MIN_SECRET_LENGTH:
        # Shorter values cannot be redacted without shredding ordinary text.
        raise ValidationError(f"a secret must be at least {MIN_SECRET_LENGTH} characters long")
    row = RepositorySecret(
        repository=repository,
        name=name,
        scope=scope,
        updated_by=by,
        encrypted_value=fernet().encrypt(value.encode()).decode(),
    )
    row.full_clean(exclude=["repository"], validate_unique=False)
    with transaction.atomic():
        existed = RepositorySecret.objects.filter(repository=repository, name=name).exists()
        RepositorySecret.objects.update_or_create(
            repository=repository,
            name=name,
            defaults={
                "scope": scope,
                "updated_by": by,
                "encrypted_value": row.encrypted_value,
            },
        )
        audit.record(
            "secret.change" if existed else "secret.add",
            actor=by,
            repository=repository,
            object_type="secret",
            object_id=name,
            data={"name": name, "scope": scope},
        )
    _forget(repository.pk)


def secret_delete(*, repository, name: str, by) -> bool:
    access.require_repo_permission(by, repository, roles.MANAGE_REPOSITORY)
    with transaction.atomic():
        deleted, _ = RepositorySecret.objects.filter(repository=repository, name=name).delete()
        if deleted:
            audit.record(
                "secret.delete",
                actor=by,
                repository=repository,
                object_type="secret",
                object_id=name,
                data={"name": name},
            )
    _forget(repository.pk)
    return bool(deleted)


def _decrypt(rows) -> dict[str, str]:
    keys = fernet()
    values = {}
    for row in rows:
        try:
            values[row.name] = keys.decrypt(row.encrypted_value.encode()).decode()
        except InvalidToken:
            raise SecretsUnavailable(
                f"secret {row.name} of {row.repository.name} cannot be decrypted with "
                "INSPECT_SECRETS_KEY (was the key changed? keep the old one after the new, "
                "comma-separated)"
            ) from None
    return values


def secret_env(repository, *, scope: str) -> dict[str, str]:
    """The environment for a command: `setup_start` gets every secret, `agent` only those
    marked for the agent; each is marked as used now. SecretsUnavailable if the repository has
    secrets and no key works."""
    rows = RepositorySecret.objects.filter(repository=repository).select_related("repository")
    if scope == Scope.AGENT:
        rows = rows.filter(scope=Scope.AGENT)
    rows = list(rows)
    if not rows:
        return {}
    values = _decrypt(rows)
    # Handed to a command now: one UPDATE for all of them (the settings page shows it).
    RepositorySecret.objects.filter(pk__in=[row.pk for row in rows]).update(
        last_used_at=timezone.now()
    )
    return values


def secret_values(repository_id: int) -> list[str]:
    """Every secret value of the repository (for redaction), cached for a moment per process.
    Without a usable key nothing can have been handed out, so there is nothing to scrub."""
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(repository_id)
        if hit is not None and now - hit[0] < CACHE_SECONDS:
            return hit[1]
    rows = list(
        RepositorySecret.objects.filter(repository_id=repository_id).select_related("repository")
    )
    values: list[str] = []
    if rows:
        try:
            values = list(_decrypt(rows).values())
        except SecretsUnavailable as exc:
            log.warning("cannot redact secrets of repository %s: %s", repository_id, exc)
    with _cache_lock:
        _cache[repository_id] = (now, values)
    return values


def secrets_found_in(repository, text: str) -> list[str]:
    """The names of the repository's secrets whose values appear in `text`, plain or encoded
    (what is about to leave the platform, such as the commits of a pull request).
    SecretsUnavailable if the repository has secrets and no key works."""
    rows = list(RepositorySecret.objects.filter(repository=repository).select_related("repository"))
    if not rows:
        return []
    return sorted(
        name
        for name, value in _decrypt(rows).items()
        if len(value) >= MIN_SECRET_LENGTH and Redactor.for_secrets((value,)).found_in(text)
    )


def _forget(repository_id: int) -> None:
    with _cache_lock:
        _cache.pop(repository_id, None)
