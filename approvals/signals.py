"""Audit entries for things that happen outside the gate: logins and membership changes. (Each
turn's file-change summary is written where a turn ends, sessions.runner.)"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from accounts.models import Membership
from approvals import audit


def _address(request) -> str:
    return request.META.get("REMOTE_ADDR", "") if request is not None else ""


@receiver(user_logged_in, dispatch_uid="audit-login")
def on_login(sender: Any, request=None, user=None, **kwargs: Any) -> None:
    audit.record(
        "account.login",
        actor=user,
        object_type="user",
        object_id=user.pk,
        data={"address": _address(request)},
    )


@receiver(user_login_failed, dispatch_uid="audit-login-failed")
def on_login_failed(sender: Any, credentials=None, request=None, **kwargs: Any) -> None:
    # Never the password: only the name that was tried.
    tried = {k: v for k, v in (credentials or {}).items() if k in ("username", "email", "login")}
    audit.record("account.login_failed", data={**tried, "address": _address(request)})


@receiver(pre_save, sender=Membership, dispatch_uid="audit-membership-before")
def remember_role(sender: Any, instance: Membership, **kwargs: Any) -> None:
    instance._audit_role_before = (
        Membership.objects.filter(pk=instance.pk).values_list("role", flat=True).first()
        if instance.pk
        else None
    )


@receiver(post_save, sender=Membership, dispatch_uid="audit-membership-saved")
def on_membership_saved(sender: Any, instance: Membership, created: bool, **kwargs: Any) -> None:
    before = getattr(instance, "_audit_role_before", None)
    if not created and before == instance.role:
        return
    audit.record(
        "membership.add" if created else "membership.role",
        repository=instance.repository,
        object_type="membership",
        object_id=instance.pk,
        data={"user": instance.user.get_username(), "role": instance.role, "before": before},
    )


@receiver(post_delete, sender=Membership, dispatch_uid="audit-membership-deleted")
def on_membership_deleted(sender: Any, instance: Membership, **kwargs: Any) -> None:
    audit.record(
        "membership.remove",
        repository=instance.repository,
        object_type="membership",
        object_id=instance.pk,
        data={"user": instance.user.get_username(), "role": instance.role},
    )
