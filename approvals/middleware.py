"""Names the signed-in user as the actor of audit entries recorded while serving a request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from approvals.audit import acting_as


class AuditActorMiddleware:
    # Async-capable: a sync-only middleware under daphne would push the whole chain through
    # thread adapters (and hung the login redirect in tests/foundation/test_run_command.py).
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self._acall(request)
        with acting_as(getattr(request, "user", None)):
            return self.get_response(request)

    async def _acall(self, request: Any) -> Any:
        # The context variable is copied into the threads that run sync views.
        with acting_as(getattr(request, "user", None)):
            return await self.get_response(request)
