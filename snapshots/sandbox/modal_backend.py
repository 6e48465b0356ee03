"""The Modal sandbox backend: each sandbox is a ``modal.Sandbox`` restored from a snapshot image.

Selected when ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` are set (see :func:`modal_configured`).
Stdlib and ``modal`` only; ``modal`` itself is imported lazily, by ``modal_sdk.ModalSDK``.

Layers
------
* ``modal_sdk.ModalSDK`` is the only code that touches the ``modal`` package. Each method is one
  SDK call (or a fixed chain of them), passes the backend's keyword arguments through unchanged,
  adds the per-process client, and turns Modal's exceptions into ``ModalCallError`` s or the
  stdlib's ``FileNotFoundError`` family. Tests hand it a stand-in for the ``modal`` package.
* :class:`ModalBackend` (here: configuration, create, attach, snapshots) and
  ``modal_sandbox.ModalSandbox`` (commands, PTYs, files) implement the protocol of ``base.py``
  on top of it.

How protocol features map to Modal (SDK 1.6)
--------------------------------------------
* snapshot ref = the object id (``im-...``) of the image ``Sandbox.snapshot_filesystem(ttl=None)``
  returns; restore = ``Image.from_id``; delete = ``modal.experimental.image_delete``.
* egress: ``none`` = ``block_network=True``; ``allowlist`` = ``outbound_domain_allowlist``;
  ``open`` = neither (see :func:`egress_arguments`). With a ``gateway_url`` (the model gateway's
  public URL), ``none`` and ``allowlist`` also allow the gateway's host and nothing more, since
  Modal sandboxes have no door into this machine.
* exec = ``Sandbox.exec(text=True, bufsize=1)`` with stdout and stderr read by two threads. Modal
  has no call to kill an exec, so every command runs under a small ``sh`` wrapper that starts it in
  a new session and writes the session id to a file; ``kill()`` signals that process group.
* A timed-out exec makes ``wait()`` return -1 (Modal raises nothing): reported as ``timed_out``.
* Files: ``Sandbox.filesystem.read_bytes/write_bytes/list_files`` on a path first resolved with
  ``realpath -m`` inside the sandbox, so symlinks cannot lead the file API out of /workspace.
* PTY: ``Sandbox.exec(pty=True)``. Modal has no resize call; ``resize`` runs ``stty`` on the pty.
* Not enforceable on Modal: ``Limits.pids``. ``lifetime_seconds`` is capped at Modal's 24 h.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from snapshots.sandbox.base import (
    AGENT_TOOLS_MOUNT,
    WORKSPACE,
    BackendUnavailable,
    Limits,
    NetworkPolicy,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxGone,
    SnapshotNotFound,
    SnapshotRef,
)
from snapshots.sandbox.modal_sandbox import BACKEND_NAME, ModalSandbox
from snapshots.sandbox.modal_sdk import (
    DEFAULT_APP_NAME,
    ModalCallError,
    ModalNotFound,
    ModalSandboxFinished,
    ModalSDK,
)

# Modal refuses sandbox timeouts above 24 hours and requires one (None is for persistent ones).
MODAL_MAX_LIFETIME_S = 24 * 3600
TAG_MANAGED = "inspect-web"
TAG_ID = "inspect-web-id"
TAG_WALL_SECONDS = "inspect-web-wall-seconds"
UNCONFIGURED_REASON = "MODAL_TOKEN_ID not set"

# Id formats the SDK itself checks (``_Object`` type prefixes): sandboxes "sb-", images "im-".
_MODAL_SANDBOX_ID = re.compile(r"^sb-[A-Za-z0-9]+$")
_MODAL_IMAGE_ID = re.compile(r"^im-[A-Za-z0-9]+$")
_PROTOCOL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def modal_unconfigured_reason(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the Modal backend cannot be used with ``environ`` (default ``os.environ``), or None."""
    env = os.environ if environ is None else environ
    if not env.get("MODAL_TOKEN_ID"):
        return UNCONFIGURED_REASON
    if not env.get("MODAL_TOKEN_SECRET"):
        return "MODAL_TOKEN_SECRET not set"
    return None


def modal_configured(environ: Mapping[str, str] | None = None) -> bool:
    """True when both Modal token variables are set, i.e. the Modal backend is the one to use."""
    return modal_unconfigured_reason(environ) is None


def egress_arguments(policy: NetworkPolicy, gateway_url: str = "") -> dict[str, Any]:
    """``Sandbox.create`` keyword arguments enforcing ``policy`` outside the sandbox.

    Modal refuses ``block_network`` together with an allowlist, so exactly one is set. The
    protocol lets ``example.com`` cover its subdomains; Modal matches names exactly unless they
    start with ``*.``, so each domain is sent both ways. ``gateway_url``'s host is added as it is
    (that name only, or that address only), so ``none`` still reaches the model gateway.
    """
    if policy.mode == "open":
        return {}
    domains: list[str] = []
    if policy.mode == "allowlist":
        for raw in policy.domains:
            dom = raw.strip().lower().rstrip(".").removeprefix("*.")
            for name in (dom, f"*.{dom}"):
                if dom and name not in domains:
                    domains.append(name)
    cidrs: list[str] = []
    gateway_host = (urlsplit(gateway_url).hostname or "").rstrip(".") if gateway_url else ""
    if gateway_host:
        try:
            cidrs.append(str(ipaddress.ip_network(gateway_host)))
        except ValueError:
            if gateway_host not in domains:
                domains.append(gateway_host)
    if not domains and not cidrs:
        # An empty allowlist means "nothing": say so with block_network rather than rely on how
        # Modal reads an empty list.
        return {"block_network": True}
    args: dict[str, Any] = {}
    if domains:
        args["outbound_domain_allowlist"] = domains
    if cidrs:
        args["outbound_cidr_allowlist"] = cidrs
    return args


def resource_arguments(limits: Limits) -> dict[str, Any]:
    """``Sandbox.create`` keyword arguments for the sandbox-wide limits Modal can enforce."""
    lifetime = limits.lifetime_seconds
    timeout = MODAL_MAX_LIFETIME_S if lifetime is None else math.ceil(lifetime)
    args: dict[str, Any] = {"timeout": max(1, min(timeout, MODAL_MAX_LIFETIME_S))}
    # Modal treats a bare number as a request; (request, limit) makes it a hard limit.
    if limits.cpus is not None:
        args["cpu"] = (float(limits.cpus), float(limits.cpus))
    if limits.memory_mb is not None:
        args["memory"] = (int(limits.memory_mb), int(limits.memory_mb))
    return args


class ModalBackend(SandboxBackend):
    """Sandboxes on Modal. Pass credentials explicitly (see :meth:`from_env` for the env)."""

    name = BACKEND_NAME

    def __init__(
        self,
        *,
        token_id: str = "",
        token_secret: str = "",
        app_name: str = DEFAULT_APP_NAME,
        base_image: str | None = None,
        agent_commands: Sequence[str] = (),
        idle_timeout: int | None = None,
        snapshot_timeout: int = 300,
        sdk: ModalSDK | None = None,
        gateway_url: str = "",
    ) -> None:
        self.sdk = sdk or ModalSDK(
            token_id=token_id,
            token_secret=token_secret,
            app_name=app_name,
            base_image=base_image,
            agent_commands=agent_commands,
        )
        self.idle_timeout = idle_timeout
        self.snapshot_timeout = snapshot_timeout
        # The model gateway's public URL: its host is let through whatever the egress.
        self.gateway_url = gateway_url

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> ModalBackend:
        """The backend for ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``; BackendUnavailable if
        they are not set."""
        env = os.environ if environ is None else environ
        reason = modal_unconfigured_reason(env)
        if reason:
            raise BackendUnavailable(f"Modal backend not configured: {reason}")
        return cls(
            token_id=env["MODAL_TOKEN_ID"], token_secret=env["MODAL_TOKEN_SECRET"], **options
        )

    def _sandbox(self, handle: Any, sandbox_id: str, wall_seconds: float | None) -> ModalSandbox:
        return ModalSandbox(
            self.sdk,
            handle,
            sandbox_id,
            wall_seconds=wall_seconds,
            snapshot_timeout=self.snapshot_timeout,
        )

    def _snapshot_image(self, ref: SnapshotRef) -> Any:
        if ref.backend != BACKEND_NAME:
            raise SnapshotNotFound(f"snapshot {ref} was made by the {ref.backend!r} backend")
        if not _MODAL_IMAGE_ID.match(ref.ref):
            raise SnapshotNotFound(f"snapshot {ref} is not a Modal image id")
        try:
            return self.sdk.image_from_id(ref.ref)
        except ModalNotFound as exc:
            raise SnapshotNotFound(f"snapshot {ref} no longer exists on Modal") from exc

    def create(
        self,
        *,
        snapshot: SnapshotRef | None,
        sandbox_id: str | None = None,
        network: NetworkPolicy | None = None,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Sandbox:
        limits = limits or Limits()
        network = network or NetworkPolicy()
        if sandbox_id is not None and (
            not _PROTOCOL_ID.match(sandbox_id)
            or _MODAL_SANDBOX_ID.match(sandbox_id)
            or sandbox_id.startswith("ap-")
        ):
            raise ValueError(
                f"sandbox id {sandbox_id!r} must match [A-Za-z0-9_-]{{1,64}} and not look like a "
                "Modal id (sb-..., ap-...)"
            )
        image = self._snapshot_image(snapshot) if snapshot else self.sdk.image_base()
        tags = {
            **(labels or {}),
            TAG_MANAGED: "1",
            TAG_WALL_SECONDS: "none" if limits.wall_seconds is None else str(limits.wall_seconds),
        }
        kwargs: dict[str, Any] = {
            "image": image,
            "workdir": WORKSPACE,
            "tags": tags,
            **resource_arguments(limits),
            **egress_arguments(network, self.gateway_url),
        }
        # No secrets: sandboxes hold no standing credentials; env is exactly what was passed.
        if env:
            kwargs["env"] = dict(env)
        if sandbox_id is not None:
            kwargs["name"] = sandbox_id
            tags[TAG_ID] = sandbox_id
        if self.idle_timeout is not None:
            kwargs["idle_timeout"] = self.idle_timeout
        handle = self.sdk.sandbox_create(**kwargs)
        return self._sandbox(handle, sandbox_id or self.sdk.sandbox_id(handle), limits.wall_seconds)

    def attach(self, sandbox_id: str) -> Sandbox:
        try:
            if _MODAL_SANDBOX_ID.match(sandbox_id):
                handle = self.sdk.sandbox_from_id(sandbox_id)
            else:
                handle = self.sdk.sandbox_from_name(sandbox_id)
            if self.sdk.sandbox_poll(handle) is not None:
                raise SandboxGone(sandbox_id, "it has finished")
        except ModalNotFound as exc:
            raise SandboxGone(sandbox_id, "Modal does not know it (or it has finished)") from exc
        except ModalSandboxFinished as exc:
            raise SandboxGone(sandbox_id, str(exc)) from exc
        wall: float | None = Limits().wall_seconds
        with contextlib.suppress(ModalCallError, ValueError):
            raw = self.sdk.sandbox_get_tags(handle).get(TAG_WALL_SECONDS)
            if raw is not None:
                wall = None if raw == "none" else float(raw)
        return self._sandbox(handle, sandbox_id, wall)

    def snapshot_from_directory(
        self, src_dir: str, *, labels: Mapping[str, str] | None = None
    ) -> SnapshotRef:
        # Modal images carry no labels; the caller keeps them with the ref.
        if not os.path.isdir(src_dir):
            raise FileNotFoundError(f"snapshot source {src_dir!r} is not a directory")
        return SnapshotRef(backend=BACKEND_NAME, ref=self.sdk.image_from_directory(src_dir))

    def delete_snapshot(self, ref: SnapshotRef) -> None:
        if ref.backend != BACKEND_NAME:
            raise SnapshotNotFound(f"snapshot {ref} was made by the {ref.backend!r} backend")
        if not _MODAL_IMAGE_ID.match(ref.ref):
            raise SnapshotNotFound(f"snapshot {ref} is not a Modal image id")
        with contextlib.suppress(ModalNotFound):  # already deleted: deleting is idempotent
            self.sdk.image_delete(ref.ref)

    def list_sandboxes(self) -> list[str]:
        ids = []
        for handle in self.sdk.sandbox_list(tags={TAG_MANAGED: "1"}):
            try:
                tags = self.sdk.sandbox_get_tags(handle)
            except ModalCallError:
                tags = {}
            ids.append(tags.get(TAG_ID) or self.sdk.sandbox_id(handle))
        return sorted(ids)

    def doctor(self) -> list[str]:
        lines = [
            f"modal: app {self.sdk.app_name!r}; snapshots are filesystem images kept until deleted",
            "modal: egress none/allowlist/open enforced by Modal (block_network, "
            "outbound_domain_allowlist)",
            f"modal: model gateway at {self.gateway_url}, its host allowed whatever the egress"
            if self.gateway_url
            else "modal: NO model gateway URL (INSPECT_GATEWAY_PUBLIC_URL): agents in Modal "
            "sandboxes cannot call a model",
            "modal: Limits.pids is not enforced (Modal has no process limit); lifetime is capped "
            f"at {MODAL_MAX_LIFETIME_S // 3600} h",
            "modal: sandbox images need /bin/sh, setsid -w, realpath -m and stty (Debian has them)",
            "modal: agent CLIs in the image at "
            f"{AGENT_TOOLS_MOUNT} ({len(self.sdk.agent_commands)} build steps)"
            if self.sdk.agent_commands
            else "modal: the image carries no agent CLIs (the CLI runtimes will not start)",
        ]
        try:
            self.sdk.app()
            lines.append("modal: credentials accepted, app reachable")
        except SandboxError as exc:
            lines.append(f"modal: NOT usable: {exc}")
        return lines


__all__ = [
    "MODAL_MAX_LIFETIME_S",
    "UNCONFIGURED_REASON",
    "ModalBackend",
    "egress_arguments",
    "modal_configured",
    "modal_unconfigured_reason",
    "resource_arguments",
]
