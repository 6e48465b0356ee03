"""A stand-in for the ``modal`` package that ``modal_sdk.ModalSDK`` is given in tests.

It records every SDK call and attribute read the adapter makes, and checks each one against the
installed SDK as it happens (``recorder.py``, ``sdk_contract``), so a test passing against the
fake also proves the real SDK would have accepted the calls. Behaviour is just enough for the
backend: sandboxes with an in-memory filesystem (files, directories, symlinks; ``realpath -m``
emulated), images that carry a copy of it, and processes (``fake_process.py``) whose output
tests script through ``on_exec``.

Errors are the real ``modal.exception`` classes, so the adapter's translation is exercised too.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import modal.exception
from modal.types import FileInfo as ModalFileInfo
from modal.types import FileType

from snapshots.sandbox import modal_sandbox as ms
from tests.snapshots.sandbox.modal.fake_process import FakeProcess
from tests.snapshots.sandbox.modal.recorder import Call, Recorder

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}-fake{next(_ids):06d}"


# --------------------------------------------------------------------------------------------
# Filesystem
# --------------------------------------------------------------------------------------------


class FakeFS:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.modes: dict[str, int] = {}
        self.dirs: set[str] = {"/", "/tmp", ms.WORKSPACE}
        self.symlinks: dict[str, str] = {}

    def copy(self) -> FakeFS:
        other = FakeFS()
        other.files = dict(self.files)
        other.modes = dict(self.modes)
        other.dirs = set(self.dirs)
        other.symlinks = dict(self.symlinks)
        return other

    def realpath(self, path: str) -> str:
        """``realpath -m``: resolve symlinks of existing components; missing ones are fine."""
        out: list[str] = []
        todo = [p for p in path.split("/") if p]
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == ".":
                continue
            if part == "..":
                if out:
                    out.pop()
                continue
            candidate = "/" + "/".join([*out, part])
            if candidate in self.symlinks:
                hops += 1
                assert hops < 40, "symlink loop"
                target = self.symlinks[candidate]
                if target.startswith("/"):
                    out = []
                todo = [p for p in target.split("/") if p] + todo
            else:
                out.append(part)
        return "/" + "/".join(out)

    def mkdirs(self, path: str) -> None:
        while path not in self.dirs:
            self.dirs.add(path)
            path = posixpath.dirname(path)

    def write(self, path: str, data: bytes) -> None:
        path = self.realpath(path)
        if path in self.dirs:
            raise modal.exception.SandboxFilesystemIsADirectoryError(f"Is a directory: {path}")
        self.mkdirs(posixpath.dirname(path))
        self.files[path] = bytes(data)
        self.modes.setdefault(path, 0o644)

    def read(self, path: str) -> bytes:
        path = self.realpath(path)
        if path in self.dirs:
            raise modal.exception.SandboxFilesystemIsADirectoryError(f"Is a directory: {path}")
        if path not in self.files:
            raise modal.exception.SandboxFilesystemNotFoundError(f"No such file: {path}")
        return self.files[path]

    def entries(self, path: str) -> list[ModalFileInfo]:
        path = self.realpath(path)
        if path in self.files:
            raise modal.exception.SandboxFilesystemNotADirectoryError(f"Not a directory: {path}")
        if path not in self.dirs:
            raise modal.exception.SandboxFilesystemNotFoundError(f"No such directory: {path}")
        found = []
        for kind, names in (
            (FileType.FILE, self.files),
            (FileType.DIRECTORY, self.dirs),
            (FileType.SYMLINK, self.symlinks),
        ):
            for name in names:
                if name != "/" and posixpath.dirname(name) == path:
                    found.append(
                        ModalFileInfo(
                            name=posixpath.basename(name),
                            path=name,
                            type=kind,
                            size=len(self.files.get(name, b"")),
                            mode=0o100000 | self.modes.get(name, 0o755),
                            permissions="rw-r--r--",
                            owner="root",
                            group="root",
                            modified_time=1_700_000_000.0,
                            symlink_target=self.symlinks.get(name),
                        )
                    )
        return found


# --------------------------------------------------------------------------------------------
# Sandboxes, images, apps, clients
# --------------------------------------------------------------------------------------------


class FakeFilesystem:
    def __init__(self, sandbox: FakeSandbox) -> None:
        self._sb = sandbox

    def read_bytes(self, *args: Any, **kwargs: Any) -> bytes:
        a = self._sb.fake.recorder.call("SandboxFilesystem.read_bytes", *args, **kwargs)
        self._sb.require_running()
        return self._sb.fs.read(a["remote_path"])

    def write_bytes(self, *args: Any, **kwargs: Any) -> None:
        a = self._sb.fake.recorder.call("SandboxFilesystem.write_bytes", *args, **kwargs)
        self._sb.require_running()
        self._sb.fs.write(a["remote_path"], a["data"])

    def list_files(self, *args: Any, **kwargs: Any) -> list[ModalFileInfo]:
        a = self._sb.fake.recorder.call("SandboxFilesystem.list_files", *args, **kwargs)
        self._sb.require_running()
        return self._sb.fs.entries(a["remote_path"])


class FakeSandbox:
    def __init__(self, fake: FakeModal, arguments: dict) -> None:
        self.fake = fake
        self._object_id = _new_id("sb")
        self.arguments = arguments  # Sandbox.create's, by name, defaults applied
        self.name: str | None = arguments["name"]
        self.tags: dict[str, str] = dict(arguments["tags"] or {})
        image = arguments["image"]
        self.fs = image.fs.copy() if isinstance(image, FakeImage) else FakeFS()
        self.returncode: int | None = None
        self.processes: dict[str, FakeProcess] = {}  # by pid file
        self.controls: list[tuple[str, tuple[str, ...]]] = []

    @property
    def object_id(self) -> str:
        self.fake.recorder.attribute("Sandbox.object_id")
        return self._object_id

    @property
    def filesystem(self) -> FakeFilesystem:
        self.fake.recorder.attribute("Sandbox.filesystem")
        return FakeFilesystem(self)

    def require_running(self) -> None:
        if self.returncode is not None:
            # What the SDK raises for work on a finished sandbox (task_id_from_response).
            raise modal.exception.ConflictError("Sandbox already finished")

    def poll(self, *args: Any, **kwargs: Any) -> int | None:
        self.fake.recorder.call("Sandbox.poll", *args, **kwargs)
        return self.returncode

    def terminate(self, *args: Any, **kwargs: Any) -> None:
        self.fake.recorder.call("Sandbox.terminate", *args, **kwargs)
        if self.returncode is None:
            self.returncode = 137
            for proc in self.processes.values():
                proc.kill()

    def get_tags(self, *args: Any, **kwargs: Any) -> dict[str, str]:
        self.fake.recorder.call("Sandbox.get_tags", *args, **kwargs)
        return dict(self.tags)

    def snapshot_filesystem(self, *args: Any, **kwargs: Any) -> FakeImage:
        a = self.fake.recorder.call("Sandbox.snapshot_filesystem", *args, **kwargs)
        self.require_running()
        image = FakeImage(self.fake, fs=self.fs.copy(), object_id=_new_id("im"))
        image.ttl = a["ttl"]
        self.fake.images[image._object_id] = image
        return image

    def exec(self, *args: str, **kwargs: Any) -> FakeProcess:
        self.fake.recorder.call("Sandbox.exec", *args, **kwargs)
        self.require_running()
        role = args[3] if len(args) > 3 and args[:2] == ("/bin/sh", "-c") else None
        if role == ms.CONTROL_NAME:
            return self._control(args[2], args[4:]).start(self.fake.recorder, args, kwargs)
        if role == ms.EXEC_WRAPPER_NAME:
            assert args[2] == ms.EXEC_WRAPPER
            pidfile, argv = args[4], args[5:]
            proc = self.fake.on_exec(argv, kwargs)
        elif role == ms.PTY_WRAPPER_NAME:
            assert args[2] == ms.PTY_WRAPPER
            pidfile, argv = args[4], args[8:]
            proc = self.fake.on_pty(argv, kwargs)
        else:
            raise AssertionError(f"the backend ran an unwrapped command: {args}")
        self.processes[pidfile] = proc
        return proc.start(self.fake.recorder, tuple(argv), kwargs)

    def _control(self, script: str, args: tuple[str, ...]) -> FakeProcess:
        """Our own shell snippets (realpath, chmod, kill, stty), emulated."""
        if script.startswith("realpath -m"):
            self.controls.append(("realpath", args))
            return FakeProcess([self.fs.realpath(p) + "\n" for p in args])
        if script.startswith("chmod"):
            self.controls.append(("chmod", args))
            mode, path = args
            self.fs.modes[path] = int(mode, 8)
            return FakeProcess()
        if script == ms.KILL_GROUP:
            self.controls.append(("kill", args))
            proc = self.processes.get(args[0])
            if proc is not None:
                proc.kill()
            return FakeProcess()
        if script == ms.RESIZE_PTY:
            self.controls.append(("resize", args))
            return FakeProcess()
        raise AssertionError(f"unknown control script: {script!r}")


class FakeImage:
    def __init__(
        self, fake: FakeModal, *, fs: FakeFS | None = None, object_id: str | None = None
    ) -> None:
        self.fake = fake
        self.fs = fs or FakeFS()
        self._object_id = object_id
        self.steps: list[str] = []
        self.ttl: int | None = None
        self.built_in: Any = None

    @property
    def object_id(self) -> str | None:
        self.fake.recorder.attribute("Image.object_id")
        return self._object_id

    def _derive(self, step: str) -> FakeImage:
        child = FakeImage(self.fake, fs=self.fs.copy())
        child.steps = [*self.steps, step]
        return child

    def workdir(self, *args: Any, **kwargs: Any) -> FakeImage:
        path = str(self.fake.recorder.call("Image.workdir", *args, **kwargs)["path"])
        child = self._derive(f"workdir {path}")
        child.fs.mkdirs(path)
        return child

    def run_commands(self, *args: Any, **kwargs: Any) -> FakeImage:
        commands = self.fake.recorder.call("Image.run_commands", *args, **kwargs)["commands"]
        return self._derive(f"run_commands {list(commands)}")

    def env(self, *args: Any, **kwargs: Any) -> FakeImage:
        variables = self.fake.recorder.call("Image.env", *args, **kwargs)["vars"]
        return self._derive(f"env {dict(variables)}")

    def add_local_dir(self, *args: Any, **kwargs: Any) -> FakeImage:
        a = self.fake.recorder.call("Image.add_local_dir", *args, **kwargs)
        local_path, remote_path = str(a["local_path"]), str(a["remote_path"])
        child = self._derive(f"add_local_dir {local_path} {remote_path} copy={a['copy']}")
        for item in Path(local_path).rglob("*"):
            dest = posixpath.join(remote_path, item.relative_to(local_path).as_posix())
            if item.is_dir():
                child.fs.mkdirs(dest)
            else:
                child.fs.write(dest, item.read_bytes())
        return child

    def build(self, *args: Any, **kwargs: Any) -> FakeImage:
        self.built_in = self.fake.recorder.call("Image.build", *args, **kwargs)["app"]
        self._object_id = _new_id("im")
        self.fake.images[self._object_id] = self
        return self

    def hydrate(self, *args: Any, **kwargs: Any) -> FakeImage:
        self.fake.recorder.call("Image.hydrate", *args, **kwargs)
        if self._object_id not in self.fake.images:
            raise modal.exception.NotFoundError(f"Image {self._object_id} not found")
        self.fs = self.fake.images[self._object_id].fs
        return self


class _ImageNamespace:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake

    def from_id(self, *args: Any, **kwargs: Any) -> FakeImage:
        a = self._fake.recorder.call("Image.from_id", *args, **kwargs)
        return FakeImage(self._fake, object_id=a["image_id"])  # loads lazily, like the SDK

    def debian_slim(self, *args: Any, **kwargs: Any) -> FakeImage:
        self._fake.recorder.call("Image.debian_slim", *args, **kwargs)
        image = FakeImage(self._fake)
        image.steps = ["debian_slim"]
        return image

    def from_registry(self, *args: Any, **kwargs: Any) -> FakeImage:
        a = self._fake.recorder.call("Image.from_registry", *args, **kwargs)
        image = FakeImage(self._fake)
        image.steps = [f"from_registry {a['tag']}"]
        return image


class _SandboxNamespace:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake

    def create(self, *args: str, **kwargs: Any) -> FakeSandbox:
        a = self._fake.recorder.call("Sandbox.create", *args, **kwargs)
        name = a["name"]
        if name and any(
            sb.name == name and sb.returncode is None for sb in self._fake.sandboxes.values()
        ):
            raise modal.exception.AlreadyExistsError(f"Sandbox named {name!r} already exists")
        sb = FakeSandbox(self._fake, a)
        self._fake.sandboxes[sb._object_id] = sb
        return sb

    def from_id(self, *args: Any, **kwargs: Any) -> FakeSandbox:
        sandbox_id = self._fake.recorder.call("Sandbox.from_id", *args, **kwargs)["sandbox_id"]
        if sandbox_id not in self._fake.sandboxes:
            raise modal.exception.NotFoundError(f"Sandbox {sandbox_id} not found")
        return self._fake.sandboxes[sandbox_id]

    def from_name(self, *args: Any, **kwargs: Any) -> FakeSandbox:
        a = self._fake.recorder.call("Sandbox.from_name", *args, **kwargs)
        app_name, name = a["app_name"], a["name"]
        for sb in self._fake.sandboxes.values():
            if sb.name == name and sb.returncode is None:
                return sb
        raise modal.exception.NotFoundError(f"Sandbox {name!r} not found in app {app_name!r}")

    def list(self, *args: Any, **kwargs: Any) -> Iterator[FakeSandbox]:
        wanted = self._fake.recorder.call("Sandbox.list", *args, **kwargs)["tags"] or {}
        for sb in list(self._fake.sandboxes.values()):
            if sb.returncode is None and all(sb.tags.get(k) == v for k, v in wanted.items()):
                yield sb


@dataclass
class FakeClient:
    token_id: str
    token_secret: str


class FakeApp:
    def __init__(self, fake: FakeModal, name: str, client: Any) -> None:
        self._fake = fake
        self.name = name
        self.client = client
        self.create_if_missing = False
        self._app_id = _new_id("ap")

    @property
    def app_id(self) -> str:
        self._fake.recorder.attribute("App.app_id")
        return self._app_id


class _AppNamespace:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake

    def lookup(self, *args: Any, **kwargs: Any) -> FakeApp:
        a = self._fake.recorder.call("App.lookup", *args, **kwargs)
        app = FakeApp(self._fake, a["name"], a["client"])
        app.create_if_missing = a["create_if_missing"]
        return app


class _ClientNamespace:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake

    def from_credentials(self, *args: Any, **kwargs: Any) -> FakeClient:
        a = self._fake.recorder.call("Client.from_credentials", *args, **kwargs)
        client = FakeClient(a["token_id"], a["token_secret"])
        self._fake.clients.append(client)
        return client


class _ExperimentalNamespace:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake

    def image_delete(self, *args: Any, **kwargs: Any) -> None:
        image_id = self._fake.recorder.call("experimental.image_delete", *args, **kwargs)[
            "image_id"
        ]
        if self._fake.images.pop(image_id, None) is None:
            raise modal.exception.NotFoundError(f"Image {image_id} not found")


class FakeModal:
    """What ``ModalSDK(modal_module=...)`` sees instead of the ``modal`` package."""

    exception = modal.exception

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.images: dict[str, FakeImage] = {}
        self.clients: list[FakeClient] = []
        self.Sandbox = _SandboxNamespace(self)
        self.Image = _ImageNamespace(self)
        self.App = _AppNamespace(self)
        self.Client = _ClientNamespace(self)
        self.experimental = _ExperimentalNamespace(self)
        # Tests replace these to script what user commands print and how they end.
        self.on_exec: Callable[[tuple[str, ...], dict], FakeProcess] = lambda argv, kw: (
            FakeProcess()
        )
        self.on_pty: Callable[[tuple[str, ...], dict], FakeProcess] = lambda argv, kw: FakeProcess(
            open_streams=True
        )

    @property
    def calls(self) -> list[Call]:
        return self.recorder.calls

    def only_sandbox(self) -> FakeSandbox:
        assert len(self.sandboxes) == 1, list(self.sandboxes)
        return next(iter(self.sandboxes.values()))
