"""The adapter over the ``modal`` package: the only code of the Modal backend that touches it.

Each method of :class:`ModalSDK` is one SDK call (or a fixed chain of them), passes the backend's
keyword arguments through unchanged, adds the per-process client, and turns Modal's exceptions
into :class:`ModalCallError` s or the stdlib's ``FileNotFoundError`` family. Tests hand it a
stand-in for the ``modal`` package (tests/snapshots/sandbox/modal/fake_modal.py).
``modal`` itself is imported lazily, when an adapter is made.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from snapshots.sandbox.base import (
    AGENT_TOOLS_MOUNT,
    WORKSPACE,
    BackendUnavailable,
    SandboxError,
    StreamName,
)

DEFAULT_APP_NAME = "inspect-web"
# The image's PATH: the platform's agent CLIs first (AGENT_TOOLS_MOUNT/bin), then Debian's.
MODAL_PATH = f"{AGENT_TOOLS_MOUNT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ModalCallError(SandboxError):
    """A Modal SDK call failed; the message names the operation and Modal's reason."""


class ModalNotFound(ModalCallError):
    """Modal says the object (sandbox, image, app) does not exist."""


class ModalSandboxFinished(ModalCallError):
    """Modal says the sandbox has already terminated."""


@dataclass(frozen=True)
class RemoteEntry:
    """A directory entry as ``SandboxFilesystem.list_files`` reports it, without Modal types."""

    name: str
    kind: str
    size: int
    mode: int
    mtime: float


_FILE_KINDS = {"file": "file", "directory": "dir", "symlink": "symlink"}


class ModalSDK:
    """Thin adapter over the ``modal`` package (1.6.x).

    ``modal_module`` replaces the package in tests; everything else calls the real SDK. A fresh
    ``Client.from_credentials`` is made per OS process, because a client (and its gRPC channel)
    must not be shared across ``fork``, as Celery's prefork pool does.
    """

    def __init__(
        self,
        *,
        token_id: str,
        token_secret: str,
        app_name: str = DEFAULT_APP_NAME,
        base_image: str | None = None,
        agent_commands: Sequence[str] = (),
        modal_module: Any = None,
    ) -> None:
        if not token_id or not token_secret:
            raise BackendUnavailable("Modal needs both MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
        self.app_name = app_name
        self.base_image = base_image
        # Shell commands that install the platform's agent CLIs into the base image, at the
        # path local sandboxes see them (snapshots/agent_installs.modal_image_commands).
        self.agent_commands = tuple(agent_commands)
        self._token_id = token_id
        self._token_secret = token_secret
        if modal_module is None:
            modal_module = importlib.import_module("modal")
            importlib.import_module("modal.experimental")  # image_delete lives here in 1.6
        self._modal = modal_module
        self._errors = modal_module.exception
        self._per_process: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    # -- errors ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def translated(self, what: str) -> Iterator[None]:
        """Turn Modal's exceptions raised while doing ``what`` into this module's / stdlib's."""
        e = self._errors
        try:
            yield
        except e.SandboxFilesystemNotFoundError as exc:
            raise FileNotFoundError(f"{what}: {exc}") from exc
        except e.SandboxFilesystemIsADirectoryError as exc:
            raise IsADirectoryError(f"{what}: {exc}") from exc
        except e.SandboxFilesystemNotADirectoryError as exc:
            raise NotADirectoryError(f"{what}: {exc}") from exc
        except e.SandboxFilesystemPermissionError as exc:
            raise PermissionError(f"{what}: {exc}") from exc
        except e.NotFoundError as exc:
            raise ModalNotFound(f"{what}: not found on Modal ({exc})") from exc
        except e.SandboxTerminatedError as exc:
            raise ModalSandboxFinished(f"{what}: the Modal sandbox has terminated") from exc
        except e.AuthError as exc:
            raise ModalCallError(
                f"{what}: Modal rejected the credentials ({exc}); check MODAL_TOKEN_ID and "
                "MODAL_TOKEN_SECRET"
            ) from exc
        except e.Error as exc:
            raise ModalCallError(f"{what}: {type(exc).__name__}: {exc}") from exc

    # -- client and app, one per process ---------------------------------------------------------

    def _process_state(self) -> dict[str, Any]:
        pid = os.getpid()
        with self._lock:
            state = self._per_process.get(pid)
            if state is None:
                # A dict inherited through fork holds the parent's client: drop it, never reuse.
                self._per_process = {}
                state = self._per_process[pid] = {}
            return state

    def client(self) -> Any:
        """This process's ``modal.Client`` (made on first use in each process)."""
        state = self._process_state()
        if "client" not in state:
            with self.translated("connecting to Modal"):
                state["client"] = self._modal.Client.from_credentials(
                    self._token_id, self._token_secret
                )
        return state["client"]

    def app(self) -> Any:
        """This process's handle on the Modal app every sandbox belongs to (created if missing)."""
        state = self._process_state()
        if "app" not in state:
            client = self.client()
            with self.translated(f"looking up Modal app {self.app_name!r}"):
                state["app"] = self._modal.App.lookup(
                    self.app_name, create_if_missing=True, client=client
                )
        return state["app"]

    # -- sandboxes -------------------------------------------------------------------------------

    def sandbox_create(self, **kwargs: Any) -> Any:
        """``modal.Sandbox.create(app=..., client=..., **kwargs)``."""
        app, client = self.app(), self.client()
        with self.translated("creating a Modal sandbox"):
            return self._modal.Sandbox.create(app=app, client=client, **kwargs)

    def sandbox_from_id(self, sandbox_id: str) -> Any:
        client = self.client()
        with self.translated(f"looking up Modal sandbox {sandbox_id}"):
            return self._modal.Sandbox.from_id(sandbox_id, client=client)

    def sandbox_from_name(self, name: str) -> Any:
        client = self.client()
        with self.translated(f"looking up Modal sandbox named {name!r}"):
            return self._modal.Sandbox.from_name(self.app_name, name, client=client)

    def sandbox_list(self, **kwargs: Any) -> list[Any]:
        """Running sandboxes of the app (``Sandbox.list`` skips finished ones)."""
        app, client = self.app(), self.client()
        with self.translated("listing Modal sandboxes"):
            return list(self._modal.Sandbox.list(app_id=app.app_id, client=client, **kwargs))

    def sandbox_id(self, sb: Any) -> str:
        return sb.object_id

    def sandbox_get_tags(self, sb: Any) -> dict[str, str]:
        with self.translated("reading sandbox tags"):
            return dict(sb.get_tags())

    def sandbox_poll(self, sb: Any) -> int | None:
        with self.translated("polling a Modal sandbox"):
            return sb.poll()

    def sandbox_terminate(self, sb: Any) -> None:
        with self.translated("terminating a Modal sandbox"):
            sb.terminate()

    def sandbox_exec(self, sb: Any, *args: str, **kwargs: Any) -> Any:
        with self.translated(f"starting {args[0] if args else 'a command'} in a Modal sandbox"):
            return sb.exec(*args, **kwargs)

    def sandbox_snapshot_filesystem(self, sb: Any, **kwargs: Any) -> str:
        """Snapshot the whole filesystem; returns the new image's object id."""
        with self.translated("snapshotting a Modal sandbox"):
            return sb.snapshot_filesystem(**kwargs).object_id

    # -- files -----------------------------------------------------------------------------------

    def fs_read_bytes(self, sb: Any, remote_path: str) -> bytes:
        with self.translated(f"reading {remote_path}"):
            return sb.filesystem.read_bytes(remote_path)

    def fs_write_bytes(self, sb: Any, data: bytes, remote_path: str) -> None:
        with self.translated(f"writing {remote_path}"):
            sb.filesystem.write_bytes(data, remote_path)

    def fs_list_files(self, sb: Any, remote_path: str) -> list[RemoteEntry]:
        with self.translated(f"listing {remote_path}"):
            entries = sb.filesystem.list_files(remote_path)
            return [
                RemoteEntry(
                    name=entry.name,
                    kind=_FILE_KINDS.get(getattr(entry.type, "value", entry.type), "other"),
                    size=int(entry.size),
                    # Keep permission bits only, whether Modal reports st_mode or just those.
                    mode=int(entry.mode) & 0o7777,
                    mtime=float(entry.modified_time),
                )
                for entry in entries
            ]

    # -- processes -------------------------------------------------------------------------------

    def process_read(self, proc: Any, stream: StreamName) -> Iterator[Any]:
        """Yield what the process writes to ``stream`` (lines with ``bufsize=1``; bytes if
        ``text=False``) until the stream ends."""
        with self.translated(f"reading {stream}"):
            yield from getattr(proc, stream)

    def process_wait(self, proc: Any) -> int:
        """The exit code; -1 if the exec's timeout passed (Modal raises nothing then)."""
        with self.translated("waiting for a command"):
            return proc.wait()

    def process_write(self, proc: Any, data: bytes) -> None:
        with self.translated("writing to a command's stdin"):
            proc.stdin.write(data)
            proc.stdin.drain()

    # -- images ----------------------------------------------------------------------------------

    def image_from_id(self, image_id: str) -> Any:
        """The image ``image_id``, hydrated now so a deleted one fails here, not in create."""
        client = self.client()
        with self.translated(f"loading Modal image {image_id}"):
            image = self._modal.Image.from_id(image_id, client=client)
            image.hydrate(client=client)
            return image

    def image_base(self) -> Any:
        """The image of an empty workspace: ``base_image`` (a registry tag) or debian_slim,
        with the platform's agent CLIs when ``agent_commands`` are given."""
        with self.translated("defining the base image"):
            if self.base_image:
                base = self._modal.Image.from_registry(self.base_image)
            else:
                base = self._modal.Image.debian_slim()
            if self.agent_commands:
                # Built by Modal's image builder (with its network), never in a sandbox; the
                # CLIs' bin/ comes first on PATH, as in local sandboxes.
                base = base.run_commands(*self.agent_commands).env({"PATH": MODAL_PATH})
            # WORKDIR creates /workspace, which Sandbox.create(workdir=...) needs to exist.
            return base.workdir(WORKSPACE)

    def image_from_directory(self, src_dir: str) -> str:
        """Build an image whose /workspace is a copy of ``src_dir``; returns its object id."""
        base = self.image_base()
        app = self.app()
        with self.translated(f"building a Modal image from {src_dir}"):
            image = base.add_local_dir(src_dir, WORKSPACE, copy=True)
            return image.build(app).object_id

    def image_delete(self, image_id: str) -> None:
        client = self.client()
        with self.translated(f"deleting Modal image {image_id}"):
            self._modal.experimental.image_delete(image_id, client=client)
