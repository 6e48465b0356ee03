"""Where each backend's sandboxes find the model gateway, and the message a runtime's
validation shows when a Modal sandbox could not (``model_access.gateway_unreachable``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions.model_access import gateway_base, gateway_unreachable
from snapshots import backends
from tests.snapshots.sandbox.gateway_standin import StandinGateway


@pytest.mark.parametrize("backend_name", ["local", "local-bwrap", "local-runsc"])
def test_local_sandboxes_always_have_their_door(settings, backend_name):
    settings.GATEWAY_PUBLIC_URL = ""

    assert gateway_unreachable(backend_name) == ""
    assert gateway_base(backend_name) == "http://127.0.0.1:4181"


def test_modal_without_a_public_url_is_told_what_to_set(settings):
    settings.GATEWAY_PUBLIC_URL = ""

    message = gateway_unreachable("modal")

    assert "INSPECT_GATEWAY_PUBLIC_URL" in message and "not set" in message


@pytest.mark.parametrize("url", ["gateway.example.com", "ftp://gateway.example.com", "https://"])
def test_modal_with_a_url_it_cannot_call_is_told_the_form(settings, url):
    settings.GATEWAY_PUBLIC_URL = url

    assert "https://host[:port]" in gateway_unreachable("modal")


def test_modal_with_a_public_url_is_fine(settings):
    settings.GATEWAY_PUBLIC_URL = "https://gateway.example.com"

    assert gateway_unreachable("modal") == ""


def test_the_configured_backends_are_given_the_gateway(settings, monkeypatch, tmp_path):
    settings.GATEWAY_SOCKET = str(tmp_path / "gateway" / "gateway.sock")
    settings.GATEWAY_PUBLIC_URL = "https://gateway.example.com"
    settings.MODAL_TOKEN_ID, settings.MODAL_TOKEN_SECRET = "ak-test", "as-test"
    monkeypatch.setattr(backends, "_backends", {})

    assert backends.sandbox_backend("modal").gateway_url == "https://gateway.example.com"
    local = backends.sandbox_backend("local-bwrap")
    assert local.gateway_socket == Path(settings.GATEWAY_SOCKET)


@pytest.mark.django_db
def test_the_doctor_says_whether_the_gateway_answers_behind_the_door(
    settings, monkeypatch, tmp_path, inspect_cli
):
    settings.GATEWAY_SOCKET = str(tmp_path / "gateway" / "gateway.sock")
    settings.SANDBOX_BACKEND = "local-bwrap"
    monkeypatch.setattr(backends, "_backends", {})

    _, down, _ = inspect_cli("doctor")
    gateway = StandinGateway(Path(settings.GATEWAY_SOCKET)).start()
    try:
        _, up, _ = inspect_cli("doctor")
    finally:
        gateway.stop()

    assert f"model gateway door: 127.0.0.1:4181 in every sandbox -> {tmp_path}" in down
    assert "DOWN: nothing at" in down and "the gateway has not started" in down
    assert "gateway answering" in up
