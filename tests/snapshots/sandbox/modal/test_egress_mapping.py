"""The repository's egress policy becomes Modal's network arguments, enforced outside the sandbox.

Besides what we send, each case runs the arguments through the SDK's own (offline) builder of the
network-access message, so "allowlist" is known to mean ALLOWLIST to Modal, not merely to us.
``_build_outbound_network_access`` is private to modal 1.6; if it moves, update the import.
"""

from __future__ import annotations

import pytest
from modal.sandbox._common import _build_outbound_network_access
from modal_proto import api_pb2

from snapshots.sandbox import NetworkPolicy
from snapshots.sandbox.modal_backend import egress_arguments

NetworkAccess = api_pb2.NetworkAccess.NetworkAccessType


def modal_network_access(create_kwargs: dict) -> api_pb2.NetworkAccess:
    return _build_outbound_network_access(
        create_kwargs.get("block_network", False),
        create_kwargs.get("outbound_cidr_allowlist"),
        create_kwargs.get("outbound_domain_allowlist"),
    )


def created_with(backend, fake_modal, network):
    backend.create(snapshot=None, network=network)
    return fake_modal.recorder.last("Sandbox.create").kwargs


def test_none_blocks_the_network(backend, fake_modal):
    kwargs = created_with(backend, fake_modal, NetworkPolicy("none"))

    assert kwargs["block_network"] is True
    assert "outbound_domain_allowlist" not in kwargs
    assert modal_network_access(kwargs).network_access_type == NetworkAccess.BLOCKED


def test_no_policy_means_none(backend, fake_modal):
    kwargs = created_with(backend, fake_modal, None)

    assert kwargs["block_network"] is True


def test_allowlist_sends_each_domain_and_its_subdomains(backend, fake_modal):
    policy = NetworkPolicy("allowlist", ("pkgs.example.org", "*.files.example.org", "GitHub.com."))

    kwargs = created_with(backend, fake_modal, policy)

    assert "block_network" not in kwargs  # Modal refuses block_network with an allowlist
    assert kwargs["outbound_domain_allowlist"] == [
        "pkgs.example.org",
        "*.pkgs.example.org",
        "files.example.org",
        "*.files.example.org",
        "github.com",
        "*.github.com",
    ]
    access = modal_network_access(kwargs)
    assert access.network_access_type == NetworkAccess.ALLOWLIST
    assert list(access.allowed_cidrs) == []  # no raw-IP escape hatch


def test_an_empty_allowlist_blocks_everything(backend, fake_modal):
    kwargs = created_with(backend, fake_modal, NetworkPolicy("allowlist", ()))

    assert kwargs["block_network"] is True
    assert "outbound_domain_allowlist" not in kwargs


def test_open_sets_no_network_arguments(backend, fake_modal):
    kwargs = created_with(backend, fake_modal, NetworkPolicy("open"))

    assert not {"block_network", "outbound_domain_allowlist", "outbound_cidr_allowlist"} & set(
        kwargs
    )
    assert modal_network_access(kwargs).network_access_type == NetworkAccess.OPEN


@pytest.mark.parametrize(
    "policy", [NetworkPolicy("none"), NetworkPolicy("allowlist", ("a.io",)), NetworkPolicy("open")]
)
def test_the_mapping_never_combines_block_network_with_an_allowlist(policy):
    args = egress_arguments(policy)

    assert not ("block_network" in args and "outbound_domain_allowlist" in args)
