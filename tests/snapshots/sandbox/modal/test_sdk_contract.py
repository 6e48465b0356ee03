"""Every SDK call the adapter makes is accepted by the installed ``modal`` (1.6.x).

The fake checks each call against the real signature as it is recorded (``sdk_contract``), so
all tests in this directory are contract tests. This module drives every adapter method once,
then asserts the whole SDK surface the backend relies on was exercised and exists, that
signatures read off synchronicity's wrappers match the implementation, and that the check
rejects calls the SDK would reject.
"""

from __future__ import annotations

import inspect
import threading

import modal
import modal.experimental
import pytest
from modal import app as modal_app
from modal import client as modal_client
from modal import container_process, io_streams
from modal._image import _Image
from modal.sandbox._filesystem import _SandboxFilesystem
from modal.sandbox._sandbox import _Sandbox

from snapshots.sandbox import NetworkPolicy
from tests.snapshots.sandbox.modal.fake_process import FakeProcess
from tests.snapshots.sandbox.modal.sdk_contract import (
    ContractViolation,
    check_attribute,
    check_call,
    real,
)

# The SDK surface the Modal backend relies on.
SDK_CALLS = {
    "App.lookup",
    "Client.from_credentials",
    "ContainerProcess.wait",
    "Image.add_local_dir",
    "Image.build",
    "Image.debian_slim",
    "Image.env",
    "Image.from_id",
    "Image.from_registry",
    "Image.hydrate",
    "Image.run_commands",
    "Image.workdir",
    "Sandbox.create",
    "Sandbox.exec",
    "Sandbox.from_id",
    "Sandbox.from_name",
    "Sandbox.get_tags",
    "Sandbox.list",
    "Sandbox.poll",
    "Sandbox.snapshot_filesystem",
    "Sandbox.terminate",
    "SandboxFilesystem.list_files",
    "SandboxFilesystem.read_bytes",
    "SandboxFilesystem.write_bytes",
    "StreamReader.__iter__",
    "StreamWriter.drain",
    "StreamWriter.write",
    "experimental.image_delete",
}
SDK_ATTRIBUTES = {
    "App.app_id",
    "ContainerProcess.stderr",
    "ContainerProcess.stdin",
    "ContainerProcess.stdout",
    "Image.object_id",
    "Sandbox.filesystem",
    "Sandbox.object_id",
}

# The undecorated classes synchronicity wraps, to check the wrappers' reported signatures.
IMPLEMENTATIONS = {
    "App": modal_app._App,
    "Client": modal_client._Client,
    "ContainerProcess": container_process._ContainerProcess,
    "Image": _Image,
    "Sandbox": _Sandbox,
    "SandboxFilesystem": _SandboxFilesystem,
    "StreamReader": io_streams._StreamReader,
    "StreamWriter": io_streams._StreamWriter,
}


def exercise_everything(fake_modal, sdk, backend, tmp_path):
    """One pass over every backend feature, hence every adapter method."""
    (tmp_path / "README.md").write_text("hello\n")
    base_ref = backend.snapshot_from_directory(str(tmp_path))
    sandbox = backend.create(
        snapshot=base_ref,
        sandbox_id="contract-1",
        network=NetworkPolicy("allowlist", ("pkgs.example.org",)),
        env={"CI": "1"},
        labels={"session": "contract-1"},
    )
    backend.create(snapshot=None, network=NetworkPolicy("open")).terminate()

    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["out\n"], stderr=["err\n"])
    sandbox.run("make test", timeout=10)
    fake_modal.on_exec = lambda argv, kw: FakeProcess(returncode=-1)
    sandbox.run("sleep 99", timeout=1)
    fake_modal.on_exec = lambda argv, kw: FakeProcess(exit_gate=threading.Event())
    handle = sandbox.exec("serve")
    handle.kill()
    handle.wait()

    sandbox.write_file("src/x.py", b"x = 1\n")
    sandbox.read_file("src/x.py")
    sandbox.list_files("src")

    pty = sandbox.open_pty()
    pty.write(b"ls\n")
    pty.resize(100, 30)
    pty.close()

    ref = sandbox.snapshot()
    backend.attach("contract-1")
    backend.attach(sdk.sandbox_id(sandbox.handle))
    backend.list_sandboxes()
    backend.doctor()
    sdk.base_image = "python:3.11-slim"
    sdk.agent_commands = ("npm install --prefix /opt/inspect/agents/x/1.0.0 x@1.0.0",)
    sdk.image_base()
    backend.delete_snapshot(ref)
    sandbox.terminate()


@pytest.fixture
def recorded(fake_modal, sdk, backend, tmp_path):
    exercise_everything(fake_modal, sdk, backend, tmp_path)
    return fake_modal.recorder


def test_modal_is_the_1_6_series():
    assert modal.__version__.startswith("1.6."), modal.__version__


def test_the_backend_exercises_the_whole_sdk_surface_it_relies_on(recorded):
    assert {c.target for c in recorded.calls} == SDK_CALLS
    assert recorded.attributes == SDK_ATTRIBUTES


def test_every_recorded_call_binds_to_the_installed_sdk(recorded):
    # The fake already checked each call when it was made; check again here so a failure in a
    # thread (where an exception could be swallowed) cannot hide.
    violations = []
    for call in recorded.calls:
        try:
            check_call(call.target, call.args, call.kwargs)
        except ContractViolation as exc:
            violations.append(str(exc))
    for attribute in recorded.attributes:
        try:
            check_attribute(attribute)
        except ContractViolation as exc:
            violations.append(str(exc))
    assert recorded.calls, "the tests recorded no SDK calls to check"
    assert violations == []


@pytest.mark.parametrize("target", sorted(SDK_CALLS - {"experimental.image_delete"}))
def test_wrapper_signatures_match_the_implementation(target):
    owner, _, name = target.partition(".")
    wrapper = inspect.signature(real(target))
    # synchronicity gives the blocking wrapper __iter__ for the implementation's __aiter__.
    impl_name = "__aiter__" if name == "__iter__" else name
    impl = inspect.signature(getattr(IMPLEMENTATIONS[owner], impl_name))
    strip = {"self", "cls"}

    assert [p for p in wrapper.parameters if p not in strip] == [
        p for p in impl.parameters if p not in strip
    ]


def test_image_delete_is_the_experimental_api_of_1_6():
    wrapped = modal.experimental.image_delete.__wrapped__
    assert list(inspect.signature(wrapped).parameters) == ["image_id", "client"]
    assert not hasattr(modal.Image, "delete")  # if this appears, prefer it


@pytest.mark.parametrize(
    ("target", "args", "kwargs"),
    [
        ("Sandbox.create", (), {"block_networks": True}),  # misspelt parameter
        ("Sandbox.create", (), {"timeout": 1.5}),  # Modal wants whole seconds
        ("Sandbox.create", (), {"outbound_domain_allowlist": "pkgs.example.org"}),  # not a list
        ("Sandbox.exec", ("ls",), {"bufsize": 0}),  # only -1 or 1
        ("Sandbox.exec", (["ls", "-l"],), {}),  # argv goes in as separate strings
        ("Sandbox.snapshot_filesystem", (), {"ttl": "forever"}),
        ("SandboxFilesystem.write_bytes", ("/workspace/x", b"data"), {}),  # data comes first
        ("Client.from_credentials", ("only-the-id",), {}),
    ],
)
def test_the_contract_check_rejects_what_the_sdk_would(target, args, kwargs):
    with pytest.raises(ContractViolation):
        check_call(target, args, kwargs)


def test_the_pre_1_6_file_api_is_gone():
    for old in ("Sandbox.open", "Sandbox.ls", "Sandbox.mkdir", "Sandbox.rm"):
        with pytest.raises(ContractViolation):
            check_attribute(old)
