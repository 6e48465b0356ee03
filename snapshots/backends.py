"""Which sandbox backend this process uses, built once per process."""

from __future__ import annotations

import os

from django.conf import settings

from snapshots import agent_installs
from snapshots.egress_settings import egress_settings
from snapshots.sandbox import BackendUnavailable, SandboxBackend

_backends: dict[tuple[int, str], SandboxBackend] = {}


def sandbox_backend(name: str | None = None) -> SandboxBackend:
    """The configured backend (`INSPECT_SANDBOX_BACKEND`), or the one named."""
    name = name or settings.SANDBOX_BACKEND
    key = (os.getpid(), name)
    if key not in _backends:
        _backends[key] = _build(name)
    return _backends[key]


def _build(name: str) -> SandboxBackend:
    # Rows name the backend that made them ("local-bwrap", "local-runsc", "modal").
    if name == "local" or name.startswith("local-"):
        # Backends load on demand (snapshots/sandbox/__init__.py): only the one in use.
        from snapshots.sandbox.local import LocalBackend

        runtime = name.removeprefix("local-") if name != "local" else settings.SANDBOX_RUNTIME
        egress = egress_settings()
        return LocalBackend(
            root=settings.SANDBOX_ROOT,
            runtime=runtime,
            egress_exceptions=egress.exceptions,
            egress_deny=egress.deny,
            egress_hosts=egress.hosts,
            disk_bytes=settings.SANDBOX_DISK_BYTES,
            tools_dir=settings.AGENT_CLIS_DIR,
            # Every sandbox reaches the model gateway at 127.0.0.1:GATEWAY_PORT through it.
            gateway_socket=settings.GATEWAY_SOCKET,
        )
    if name == "modal":
        if not (settings.MODAL_TOKEN_ID and settings.MODAL_TOKEN_SECRET):
            raise BackendUnavailable(
                "the modal backend needs MODAL_TOKEN_ID and MODAL_TOKEN_SECRET to be set"
            )
        # On demand, as the local backend above.
        from snapshots.sandbox.modal_backend import ModalBackend

        return ModalBackend(
            token_id=settings.MODAL_TOKEN_ID,
            token_secret=settings.MODAL_TOKEN_SECRET,
            app_name=settings.MODAL_APP_NAME,
            # The same pinned CLIs at the same path.
            agent_commands=agent_installs.modal_image_commands(),
            # No door into this machine from Modal: its sandboxes reach the gateway's URL.
            gateway_url=settings.GATEWAY_PUBLIC_URL,
        )
    raise BackendUnavailable(f"unknown sandbox backend {name!r}; use 'local' or 'modal'")
