"""What Modal is asked for when a sandbox is created: image, lifetime, resources, tags, env.

The last test feeds the recorded arguments to the SDK's own client-side validation
(``SandboxCreateCommon``, private to modal 1.6), which runs offline.
"""

from __future__ import annotations

import pytest
from modal._resources import convert_fn_config_to_resources_config
from modal.sandbox._common import SandboxCreateArgs, SandboxCreateCommon

from snapshots.sandbox import Limits, NetworkPolicy
from snapshots.sandbox import modal_backend as mb
from snapshots.sandbox.modal_backend import ModalBackend
from snapshots.sandbox.modal_sdk import MODAL_PATH, ModalSDK


def test_an_empty_workspace_starts_from_the_base_image(backend, fake_modal):
    backend.create(snapshot=None)

    kwargs = fake_modal.recorder.last("Sandbox.create").kwargs
    assert kwargs["image"].steps == ["debian_slim", "workdir /workspace"]
    assert kwargs["workdir"] == "/workspace"
    assert kwargs["app"].name == "inspect-web" and kwargs["client"] is fake_modal.clients[0]


def test_a_configured_base_image_comes_from_its_registry(fake_modal):
    sdk = ModalSDK(
        token_id="t", token_secret="s", base_image="python:3.12-slim", modal_module=fake_modal
    )
    ModalBackend(sdk=sdk).create(snapshot=None)

    image = fake_modal.recorder.last("Sandbox.create").kwargs["image"]
    assert image.steps == ["from_registry python:3.12-slim", "workdir /workspace"]


def test_limits_become_lifetime_and_hard_resource_limits(backend, fake_modal):
    backend.create(snapshot=None, limits=Limits(memory_mb=2048, cpus=1.5, lifetime_seconds=1800.5))

    kwargs = fake_modal.recorder.last("Sandbox.create").kwargs
    assert kwargs["timeout"] == 1801
    assert kwargs["cpu"] == (1.5, 1.5)  # (request, limit): a bare number is only a request
    assert kwargs["memory"] == (2048, 2048)


@pytest.mark.parametrize("lifetime", [None, 3 * 24 * 3600.0])
def test_the_lifetime_is_capped_at_modals_maximum(backend, fake_modal, lifetime):
    backend.create(snapshot=None, limits=Limits(lifetime_seconds=lifetime))

    assert fake_modal.recorder.last("Sandbox.create").kwargs["timeout"] == mb.MODAL_MAX_LIFETIME_S


def test_labels_become_tags_and_no_secrets_are_passed(backend, fake_modal):
    backend.create(
        snapshot=None,
        labels={"session": "s-42", "repository": "widgets"},
        env={"PIP_INDEX_URL": "https://pkgs.example.org/simple"},
    )

    kwargs = fake_modal.recorder.last("Sandbox.create").kwargs
    assert kwargs["tags"]["session"] == "s-42"
    assert kwargs["tags"]["repository"] == "widgets"
    assert kwargs["tags"][mb.TAG_MANAGED] == "1"
    assert kwargs["env"] == {"PIP_INDEX_URL": "https://pkgs.example.org/simple"}
    assert "secrets" not in kwargs


def test_a_requested_id_becomes_the_modal_name(backend, fake_modal):
    sandbox = backend.create(snapshot=None, sandbox_id="session-42")

    kwargs = fake_modal.recorder.last("Sandbox.create").kwargs
    assert sandbox.id == "session-42"
    assert kwargs["name"] == "session-42"
    assert kwargs["tags"][mb.TAG_ID] == "session-42"


def test_without_a_requested_id_the_sandbox_is_known_by_its_modal_id(backend, fake_modal):
    sandbox = backend.create(snapshot=None)

    assert sandbox.id == fake_modal.only_sandbox().object_id
    assert sandbox.id.startswith("sb-")
    assert "name" not in fake_modal.recorder.last("Sandbox.create").kwargs


@pytest.mark.parametrize("bad", ["has space", "x" * 65, "sb-abc123", "ap-abc123", ""])
def test_ids_that_are_not_protocol_ids_or_look_like_modal_ids_are_refused(backend, bad):
    with pytest.raises(ValueError, match="sandbox id"):
        backend.create(snapshot=None, sandbox_id=bad)


def test_the_idle_timeout_is_a_backend_option(sdk, fake_modal):
    ModalBackend(sdk=sdk, idle_timeout=600).create(snapshot=None)

    assert fake_modal.recorder.last("Sandbox.create").kwargs["idle_timeout"] == 600


@pytest.mark.parametrize(
    "network",
    [
        NetworkPolicy("none"),
        NetworkPolicy("allowlist", ("pkgs.example.org",)),
        NetworkPolicy("open"),
    ],
)
def test_modals_own_validation_accepts_what_we_send(backend, fake_modal, network):
    backend.create(
        snapshot=None,
        sandbox_id="s-1",
        network=network,
        env={"A": "1"},
        limits=Limits(cpus=2, memory_mb=4096),
        labels={"session": "s-1"},
    )
    kwargs = dict(fake_modal.recorder.last("Sandbox.create").kwargs)
    del kwargs["app"], kwargs["client"]
    kwargs["image"] = None  # the fake image is not an SDK image; its presence is checked above

    SandboxCreateCommon(SandboxCreateArgs(**kwargs), secrets=[])  # raises InvalidError if not
    resources = convert_fn_config_to_resources_config(
        cpu=kwargs["cpu"], memory=kwargs["memory"], gpu=None
    )
    assert (resources.milli_cpu_max, resources.memory_mb_max) == (2000, 4096)


def test_the_image_carries_the_platforms_pinned_agent_clis_at_the_local_path(fake_modal, tmp_path):
    """The Modal image is built with the same pinned CLIs, each in a directory of its own under
    /opt/inspect/agents, and their bin/ links first on PATH (installed by Modal's image builder,
    never by a sandbox)."""
    from snapshots import agent_installs

    commands = agent_installs.modal_image_commands()
    sdk = ModalSDK(token_id="t", token_secret="s", agent_commands=commands, modal_module=fake_modal)
    ModalBackend(sdk=sdk).create(snapshot=None)

    image = fake_modal.recorder.last("Sandbox.create").kwargs["image"]
    assert image.steps[0] == "debian_slim" and image.steps[-1] == "workdir /workspace"
    assert image.steps[1] == f"run_commands {commands}"
    assert image.steps[2] == f"env {{'PATH': '{MODAL_PATH}'}}"
    assert MODAL_PATH.startswith("/opt/inspect/agents/bin:")
    script = "\n".join(commands)
    for runtime, cli in agent_installs.PINNED.items():
        prefix = f"/opt/inspect/agents/{runtime}/{cli.version}"
        assert f"npm install --prefix {prefix} " in script
        assert f" {cli.package}@{cli.version}" in script
        link = f"../{runtime}/{cli.version}/node_modules/.bin/{cli.binary}"
        assert f"ln -sfn {link} /opt/inspect/agents/bin/{cli.binary}" in script
    assert "nodejs.org/dist/v20." in script  # the node major the pinned versions are tested on
    # A snapshot of a repository is built on the same base, so every sandbox has them.
    (tmp_path / "README.md").write_text("hi\n")
    ref = ModalBackend(sdk=sdk).snapshot_from_directory(str(tmp_path))
    assert fake_modal.images[ref.ref].steps[:3] == image.steps[:3]
    assert any("agent CLIs in the image" in line for line in ModalBackend(sdk=sdk).doctor())


def test_the_configured_modal_backend_builds_its_image_with_the_pinned_clis(settings):
    from snapshots import backends

    settings.MODAL_TOKEN_ID, settings.MODAL_TOKEN_SECRET = "ak-x", "as-x"
    backend = backends._build("modal")
    from snapshots import agent_installs

    assert backend.sdk.agent_commands == tuple(agent_installs.modal_image_commands())
