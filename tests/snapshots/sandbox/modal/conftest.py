"""Fixtures for the Modal backend's offline tests: the real backend and adapter over a fake
``modal`` package (see ``fake_modal``). No network, no Modal account, no Redis; the tests use
no Django either (pytest-django merely loads the settings the root conftest touches)."""

from __future__ import annotations

import pytest

from snapshots.sandbox import modal_sandbox
from snapshots.sandbox.modal_backend import ModalBackend
from snapshots.sandbox.modal_sandbox import ModalSandbox
from snapshots.sandbox.modal_sdk import ModalSDK
from tests.snapshots.sandbox.modal.fake_modal import FakeModal


@pytest.fixture(scope="session", autouse=True)
def redis_server():
    """These tests need neither Redis nor Django settings (overrides tests/conftest.py)."""
    return None


@pytest.fixture
def fake_modal() -> FakeModal:
    return FakeModal()


@pytest.fixture
def sdk(fake_modal: FakeModal) -> ModalSDK:
    return ModalSDK(token_id="ak-test", token_secret="as-test", modal_module=fake_modal)


@pytest.fixture
def backend(sdk: ModalSDK) -> ModalBackend:
    return ModalBackend(sdk=sdk)


@pytest.fixture
def sandbox(backend: ModalBackend) -> ModalSandbox:
    sb = backend.create(snapshot=None)
    assert isinstance(sb, ModalSandbox)
    return sb


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> float:
    """Make the wait for streams held open by background children short."""
    monkeypatch.setattr(modal_sandbox, "STREAM_GRACE_S", 0.2)
    return 0.2
