"""A Modal sandbox has no door into this machine: it reaches the model gateway at its public URL
(INSPECT_GATEWAY_PUBLIC_URL), so that host, and only that host, is let through whatever the
egress. Each case also runs the arguments through the SDK's own offline builder of the
network-access message (see test_egress_mapping.py)."""

from __future__ import annotations

import pytest
from modal.sandbox._common import _build_outbound_network_access
from modal_proto import api_pb2

from snapshots.sandbox import NetworkPolicy
from snapshots.sandbox.modal_backend import ModalBackend

NetworkAccess = api_pb2.NetworkAccess.NetworkAccessType
GATEWAY = "https://gateway.inspect.example.com/"


@pytest.fixture
def gated(sdk) -> ModalBackend:
    return ModalBackend(sdk=sdk, gateway_url=GATEWAY)


def created_with(backend, fake_modal, network) -> dict:
    backend.create(snapshot=None, network=network)
    kwargs = fake_modal.recorder.last("Sandbox.create").kwargs
    # Modal itself must accept the combination (it refuses block_network with an allowlist).
    kwargs["_access"] = _build_outbound_network_access(
        kwargs.get("block_network", False),
        kwargs.get("outbound_cidr_allowlist"),
        kwargs.get("outbound_domain_allowlist"),
    )
    return kwargs


def test_egress_none_allows_the_gateways_host_and_nothing_else(gated, fake_modal):
    kwargs = created_with(gated, fake_modal, NetworkPolicy("none"))

    assert "block_network" not in kwargs
    assert kwargs["outbound_domain_allowlist"] == ["gateway.inspect.example.com"]
    assert "outbound_cidr_allowlist" not in kwargs
    access = kwargs["_access"]
    assert access.network_access_type == NetworkAccess.ALLOWLIST
    assert list(access.allowed_domains) == ["gateway.inspect.example.com"]
    assert list(access.allowed_cidrs) == []


def test_an_allowlist_gets_the_gateway_added_without_its_subdomains(gated, fake_modal):
    kwargs = created_with(gated, fake_modal, NetworkPolicy("allowlist", ("pkgs.example.org",)))

    assert kwargs["outbound_domain_allowlist"] == [
        "pkgs.example.org",
        "*.pkgs.example.org",
        "gateway.inspect.example.com",  # exactly the gateway's name: no *.inspect.example.com
    ]


def test_a_gateway_by_address_is_allowed_as_that_address_only(sdk, fake_modal):
    backend = ModalBackend(sdk=sdk, gateway_url="https://203.0.113.7:8443")

    kwargs = created_with(backend, fake_modal, NetworkPolicy("none"))

    assert kwargs["outbound_cidr_allowlist"] == ["203.0.113.7/32"]
    assert "outbound_domain_allowlist" not in kwargs
    assert kwargs["_access"].network_access_type == NetworkAccess.ALLOWLIST


def test_open_egress_needs_no_exception(gated, fake_modal):
    kwargs = created_with(gated, fake_modal, NetworkPolicy("open"))

    assert kwargs["_access"].network_access_type == NetworkAccess.OPEN


def test_without_a_gateway_url_none_still_blocks_everything(backend, fake_modal):
    kwargs = created_with(backend, fake_modal, NetworkPolicy("none"))

    assert kwargs["block_network"] is True
    assert kwargs["_access"].network_access_type == NetworkAccess.BLOCKED


def test_the_doctor_says_whether_modal_sandboxes_can_reach_the_gateway(gated, backend):
    assert any(GATEWAY in line for line in gated.doctor())
    assert any("NO model gateway URL" in line for line in backend.doctor())
