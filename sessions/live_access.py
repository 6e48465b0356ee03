"""Open connections follow access changes: websockets and SSE streams are re-authorized while
they last, not only when they open.

Two paths, so that a lost notification is only a delay:
- at once: saving or deleting a Membership, or saving a user (deactivation), sends
  `access.changed` to the user's group `user.<id>` (after commit); every websocket consumer joins
  its user's group and re-checks on that message.
- on a heartbeat: every consumer re-checks every `recheck_seconds()` (INSPECT_WS_RECHECK_SECONDS,
  at most 30 s), so a change made without a signal (a queryset update, another tool editing the
  database, a notification the channel layer dropped) is caught within it.

A re-check asks the one access rule (accounts.access) about a freshly loaded user: a user
deactivated since connecting, or no longer a member, is closed with 4403; what a role allows
(typing in the terminal) is re-read too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import Http404

from accounts import access
from accounts.models import Membership
from sessions.models import Session

log = logging.getLogger(__name__)

ACCESS_CHANGED = "access.changed"
FORBIDDEN = 4403


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def recheck_seconds() -> float:
    return float(settings.WS_RECHECK_SECONDS)


def current_user(user_id: int):
    """The user as the database has it now (None if deleted or deactivated since)."""
    return get_user_model().objects.filter(pk=user_id, is_active=True).first()


def seen_session(user, session_id: int, sessions=None) -> Session | None:
    """The session `user` may see, from `sessions` (a queryset of Session, to choose what is
    loaded with it); None if there is none they may (the one access rule: accounts.access).
    The membership check of every websocket and stream."""
    try:
        return access.get_visible_or_404(
            user, Session.objects.all() if sessions is None else sessions, pk=session_id
        )
    except Http404:
        return None


def visible_session(user, session_id: int) -> tuple[int, int] | None:
    """The session `user` may see, as (id, last_seq); None if there is none they may. What
    every live stream (websocket, SSE) opens with."""
    session = seen_session(user, session_id, Session.objects.only("id", "last_seq"))
    return None if session is None else (session.pk, session.last_seq)


def still_sees_session(user_id: int, session_id: int) -> bool:
    """Whether the user, as the database has them now, may still see the session."""
    user = current_user(user_id)
    return user is not None and visible_session(user, session_id) is not None


def access_changed(user_id: int) -> None:
    """Tell every open connection of `user_id` to re-check, once the change is committed.
    Best effort: the heartbeat catches a lost message."""

    def send() -> None:
        from channels.layers import get_channel_layer

        from sessions.events import _layer_call

        layer = get_channel_layer()
        if layer is None:
            return
        try:
            _layer_call(layer.group_send(user_group(user_id), {"type": ACCESS_CHANGED}))
        except Exception as exc:  # the heartbeat re-checks anyway
            log.warning("could not tell user %s's connections to re-check: %s", user_id, exc)

    transaction.on_commit(send)


@receiver(post_save, sender=Membership, dispatch_uid="live-access-membership-saved")
@receiver(post_delete, sender=Membership, dispatch_uid="live-access-membership-deleted")
def on_membership_changed(sender: Any, instance: Membership, **kwargs: Any) -> None:
    access_changed(instance.user_id)


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="live-access-user-saved")
def on_user_saved(sender: Any, instance, created: bool, update_fields=None, **kwargs: Any) -> None:
    # A login saves `last_login` alone; anything else may be a deactivation.
    if created or (update_fields is not None and "is_active" not in update_fields):
        return
    access_changed(instance.pk)


class AccessWatch:
    """Mixin for a websocket consumer: `watch_access(user_id, check, revoked)` after accepting.

    `check` (sync, run in a thread) says whether the connection may go on; when it says no,
    `revoked` is awaited (it closes the socket with 4403). The consumer calls `unwatch_access`
    in its `disconnect`.
    """

    _access_task: asyncio.Task | None = None
    _access_group: str | None = None
    _access_lost = False

    async def watch_access(
        self,
        user_id: int,
        check: Callable[[], bool],
        revoked: Callable[[], Awaitable[None]],
    ) -> None:
        self._access_check = check
        self._access_revoked = revoked
        self._access_group = user_group(user_id)
        try:
            await self.channel_layer.group_add(self._access_group, self.channel_name)
        except Exception as exc:  # no notifications: the heartbeat still re-checks
            log.warning("user %s's connection re-checks on its heartbeat only: %s", user_id, exc)
        self._access_task = asyncio.ensure_future(self._access_heartbeat())

    async def unwatch_access(self) -> None:
        task, self._access_task = self._access_task, None
        group, self._access_group = self._access_group, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if group is not None:
            with contextlib.suppress(Exception):
                await self.channel_layer.group_discard(group, self.channel_name)

    async def access_changed(self, message: dict) -> None:
        await self.recheck_access()

    async def recheck_access(self) -> bool:
        """Re-check now; closes the connection (through `revoked`) and returns False if it may
        not go on. A database error keeps the connection (as the stream rides out a database
        blip): the next heartbeat tries again."""
        if self._access_group is None:  # not watching (yet, or any more)
            return not self._access_lost
        try:
            allowed = await database_sync_to_async(self._access_check)()
        except Exception as exc:
            log.warning("re-checking access of %s failed: %s", self._access_group, exc)
            return True
        if not allowed and self._access_group is not None:
            self._access_lost = True
            await self.unwatch_access()
            await self._access_revoked()
        return allowed

    async def _access_heartbeat(self) -> None:
        while True:
            await asyncio.sleep(recheck_seconds())
            # Renews the group too (the core layer forgets groups after group_expiry).
            with contextlib.suppress(Exception):
                await self.channel_layer.group_add(self._access_group, self.channel_name)
            if not await self.recheck_access():
                return
