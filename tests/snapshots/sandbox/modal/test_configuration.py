"""The Modal backend is chosen when its token is set; otherwise it says exactly what is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from snapshots.sandbox import BackendUnavailable
from snapshots.sandbox.modal_backend import (
    ModalBackend,
    modal_configured,
    modal_unconfigured_reason,
)
from snapshots.sandbox.modal_sdk import ModalSDK
from tests.snapshots.sandbox.modal.conformance import modal_backend_param

TOKEN = {"MODAL_TOKEN_ID": "ak-1", "MODAL_TOKEN_SECRET": "as-1"}


def test_both_token_variables_select_modal():
    assert modal_configured(TOKEN)
    assert modal_unconfigured_reason(TOKEN) is None


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        ({}, "MODAL_TOKEN_ID not set"),
        ({"MODAL_TOKEN_SECRET": "as-1"}, "MODAL_TOKEN_ID not set"),
        ({"MODAL_TOKEN_ID": "ak-1"}, "MODAL_TOKEN_SECRET not set"),
        ({"MODAL_TOKEN_ID": "", "MODAL_TOKEN_SECRET": "as-1"}, "MODAL_TOKEN_ID not set"),
    ],
)
def test_a_missing_variable_is_named(environ, reason):
    assert not modal_configured(environ)
    assert modal_unconfigured_reason(environ) == reason
    with pytest.raises(BackendUnavailable, match=reason):
        ModalBackend.from_env(environ)


def test_from_env_hands_the_token_to_the_adapter(fake_modal, monkeypatch):
    made = {}
    real_init = ModalSDK.__init__

    def spy(self, **kwargs):
        made.update(kwargs)
        real_init(self, **kwargs, modal_module=fake_modal)

    monkeypatch.setattr(ModalSDK, "__init__", spy)
    backend = ModalBackend.from_env(TOKEN, app_name="ci-app")
    backend.sdk.client()

    assert made["token_id"] == "ak-1" and made["token_secret"] == "as-1"
    assert made["app_name"] == "ci-app"
    assert fake_modal.recorder.last("Client.from_credentials").args == ("ak-1", "as-1")


def test_the_adapter_refuses_half_a_token(fake_modal):
    with pytest.raises(BackendUnavailable, match="MODAL_TOKEN_SECRET"):
        ModalSDK(token_id="ak-1", token_secret="", modal_module=fake_modal)


def test_the_conformance_suite_skips_modal_without_a_token():
    param = modal_backend_param({})

    (mark,) = param.marks
    assert param.values == ("modal",) and param.id == "modal"
    assert mark.name == "skipif" and mark.args == (True,)
    assert mark.kwargs["reason"] == "MODAL_TOKEN_ID not set"
    assert modal_backend_param(TOKEN).marks[0].args == (False,)


def test_importing_the_backend_does_not_import_modal():
    code = (
        "import sys, snapshots.sandbox.modal_backend as m; "
        "print(m.modal_configured({}), 'modal' in sys.modules)"
    )
    repo = Path(__file__).resolve().parents[4]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo
    )

    assert out.stdout.split() == ["False", "False"]
