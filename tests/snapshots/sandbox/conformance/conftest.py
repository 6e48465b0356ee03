"""Fixtures of the sandbox backend conformance suite (no Django, no database).

Every test runs once per backend in ``BACKENDS``. A backend that cannot run here is skipped
with the reason it gives (``skip_reason``). To add a backend, add a ``BackendSpec``: e.g. the
Modal backend registers ``modal`` below and is skipped with "MODAL_TOKEN_ID not set" when its
credentials are absent.

``caps`` lets a test ask about properties that differ legitimately between backends, e.g.
``same_host`` (the sandbox runs on this machine, so a TCP server the test starts on the host's
127.0.0.1 is a meaningful target), ``survives_oom`` (a command killed by the memory limit leaves
the sandbox running; under gVisor the whole sandbox is the OOM victim), ``pids_attribution``
(a fork refused by the process limit is reported as ``limit_hit='pids'``), ``host_processes``
(sandbox processes are host processes, visible in the host's /proc; not so under gVisor),
``gateway_door`` (127.0.0.1:GATEWAY_PORT inside reaches the socket ``backend.gateway_socket``;
Modal sandboxes reach the gateway by its public URL instead).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from snapshots.sandbox.base import Limits, NetworkPolicy, Sandbox, SandboxBackend, SnapshotRef

ALLOWED_TEST_NETWORK = "203.0.113"  # a /30: the host side is .1, the test host .2
ALLOWED_TEST_ADDRESS = f"{ALLOWED_TEST_NETWORK}.2"


@dataclass
class BackendSpec:
    name: str
    make: Callable[[Path], SandboxBackend]
    skip_reason: Callable[[], str | None]
    caps: set[str] = field(default_factory=set)


def _local_skip(runtime: str) -> Callable[[], str | None]:
    def reason() -> str | None:
        if os.geteuid() != 0:
            return "the local backend needs root (overlay mounts, cgroups)"
        if not shutil.which("bwrap"):
            return "bubblewrap is not installed"
        if runtime == "runsc":
            from snapshots.sandbox import runsc

            problem = runsc.problem()
            return f"runsc cannot run here: {problem}" if problem else None
        return None

    return reason


def _make_local(runtime: str) -> Callable[[Path], SandboxBackend]:
    def make(root: Path) -> SandboxBackend:
        from snapshots.sandbox.local import LocalBackend

        # allowed.test is a test host the allowlist tests make in a network namespace, on a
        # public-looking TEST-NET-3 address (the proxy refuses loopback and private ones).
        # The gateway's socket is one a test may serve (test_gateway_door.py).
        return LocalBackend(
            root / runtime,
            runtime=runtime,
            egress_hosts={"allowed.test": ALLOWED_TEST_ADDRESS},
            gateway_socket=root / f"{runtime}-gateway" / "gateway.sock",
        )

    return make


def _modal_skip() -> str | None:
    if not os.environ.get("MODAL_TOKEN_ID"):
        return "MODAL_TOKEN_ID not set"
    try:
        import snapshots.sandbox.modal_backend  # noqa: F401
    except ImportError as exc:
        return f"modal backend not importable: {exc}"
    return None


def _make_modal(root: Path) -> SandboxBackend:
    from snapshots.sandbox import modal_backend

    return modal_backend.ModalBackend.from_env()


LOCAL_CAPS = {"same_host", "local_layout", "gateway_door"}
BACKENDS: dict[str, BackendSpec] = {
    "local-bwrap": BackendSpec(
        "local-bwrap", _make_local("bwrap"), _local_skip("bwrap"), LOCAL_CAPS | {"cgroups"}
    ),
    "local-runsc": BackendSpec(
        "local-runsc", _make_local("runsc"), _local_skip("runsc"), LOCAL_CAPS
    ),
    "modal": BackendSpec("modal", _make_modal, _modal_skip, set()),
}


# gVisor sandboxes take ~0.4 s each to start (vs ~0.05 s for bubblewrap), so by default the
# runsc param runs one or more representative tests per feature file; the full suite passes too
# and runs with SANDBOX_CONFORMANCE_FULL=1.
RUNSC_QUICK = {
    "test_host_environment_is_not_visible",
    "test_cannot_write_outside_workspace_and_tmp",
    "test_other_sandboxes_are_invisible",
    "test_none_blocks_host_loopback_services",
    "test_open_does_not_reach_host_loopback",
    "test_allowlist_allows_listed_domain_only",
    "test_timeout_kills_and_reports_wall_time",
    "test_memory_limit_kills_and_reports_memory",
    "test_pids_limit_reports_pids",
    "test_interleaved_stdout_stderr_order",
    "test_exit_codes",
    "test_wait_without_iterating_keeps_output",
    "test_interactive_shell_and_resize",
    "test_write_read_roundtrip_is_visible_to_commands",
    "test_paths_outside_are_refused",
    "test_symlink_escapes_are_refused",
    "test_roundtrip_with_changes_and_deletions",
    "test_layered_snapshots_and_deleting_a_base_file_again",
    "test_terminate_kills_processes_and_is_idempotent",
    "test_background_processes_survive_between_execs",
    "test_reattach_from_a_fresh_backend_object",
    "test_the_gateway_answers_inside_a_sandbox_without_network",
    "test_a_gateway_restart_is_seen_by_a_running_sandbox",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SANDBOX_CONFORMANCE_FULL"):
        return
    skip = pytest.mark.skip(
        reason="local-runsc runs its quick subset by default (gVisor start ~0.4 s per "
        "sandbox); SANDBOX_CONFORMANCE_FULL=1 runs everything"
    )
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("backend_spec") != "local-runsc":
            continue
        if getattr(item, "originalname", item.name) not in RUNSC_QUICK:
            item.add_marker(skip)


@pytest.fixture(scope="session", params=list(BACKENDS))
def backend_spec(request: pytest.FixtureRequest) -> BackendSpec:
    spec = BACKENDS[request.param]
    reason = spec.skip_reason()
    if reason:
        pytest.skip(reason)
    return spec


@pytest.fixture(scope="session")
def backend(
    backend_spec: BackendSpec, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SandboxBackend]:
    be = backend_spec.make(tmp_path_factory.mktemp("sandbox-backend"))
    yield be
    for sid in be.list_sandboxes():
        be.attach(sid).terminate()
    reap = getattr(be, "reap", None)  # local: also clean up sandboxes that died half-way
    if reap is not None:
        reap()


@pytest.fixture(scope="session")
def caps(backend_spec: BackendSpec) -> set[str]:
    return backend_spec.caps


def make_tree(root: Path) -> Path:
    """A small repository-like tree used as the base snapshot."""
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("# demo\n")
    (root / "src" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "src" / "pkg" / "mod.py").write_text("def f():\n    return 42\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.txt").write_text("guide\n")
    (root / "data.bin").write_bytes(bytes(range(256)) * 4)
    (root / "link-to-readme").symlink_to("README.md")
    return root


@pytest.fixture(scope="session")
def base_snapshot(backend: SandboxBackend, tmp_path_factory: pytest.TempPathFactory) -> SnapshotRef:
    src = make_tree(tmp_path_factory.mktemp("base-tree"))
    return backend.snapshot_from_directory(str(src))


@pytest.fixture
def new_sandbox(
    backend: SandboxBackend, base_snapshot: SnapshotRef
) -> Iterator[Callable[..., Sandbox]]:
    """Factory: ``new_sandbox(network=..., limits=..., env=..., snapshot=...)``; all created
    sandboxes are terminated after the test."""
    made: list[Sandbox] = []

    def factory(**kwargs: object) -> Sandbox:
        kwargs.setdefault("snapshot", base_snapshot)
        kwargs.setdefault("network", NetworkPolicy("none"))
        kwargs.setdefault("limits", Limits(wall_seconds=60, memory_mb=1024, pids=256))
        sb = backend.create(**kwargs)  # type: ignore[arg-type]
        made.append(sb)
        return sb

    yield factory
    for sb in made:
        sb.terminate()


@pytest.fixture
def sandbox(new_sandbox: Callable[..., Sandbox]) -> Sandbox:
    return new_sandbox()
