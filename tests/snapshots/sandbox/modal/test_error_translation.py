"""Modal's exceptions come out of the adapter as errors the rest of the platform understands."""

from __future__ import annotations

import pytest
from modal import exception as modal_errors

from snapshots.sandbox import SandboxError
from snapshots.sandbox.modal_sdk import ModalCallError, ModalNotFound, ModalSandboxFinished


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (modal_errors.SandboxFilesystemNotFoundError("gone"), FileNotFoundError),
        (modal_errors.SandboxFilesystemIsADirectoryError("dir"), IsADirectoryError),
        (modal_errors.SandboxFilesystemNotADirectoryError("file"), NotADirectoryError),
        (modal_errors.SandboxFilesystemPermissionError("no"), PermissionError),
        (modal_errors.NotFoundError("no such image"), ModalNotFound),
        (modal_errors.SandboxTerminatedError(), ModalSandboxFinished),
        (modal_errors.ConflictError("Sandbox already finished"), ModalCallError),
        (modal_errors.InvalidError("bad argument"), ModalCallError),
    ],
)
def test_modal_errors_are_translated(sdk, raised, expected):
    with pytest.raises(expected), sdk.translated("reading /workspace/x"):
        raise raised


def test_every_translated_modal_error_is_a_sandbox_error_with_context(sdk):
    expected = "creating a Modal sandbox: InvalidError: bad cpu"
    with pytest.raises(SandboxError, match=expected), sdk.translated("creating a Modal sandbox"):
        raise modal_errors.InvalidError("bad cpu")


def test_rejected_credentials_say_which_variables_to_check(sdk):
    expected = "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"
    with pytest.raises(ModalCallError, match=expected), sdk.translated("connecting to Modal"):
        raise modal_errors.AuthError("token invalid")


def test_programming_errors_are_not_disguised(sdk):
    with pytest.raises(KeyError), sdk.translated("anything"):
        raise KeyError("bug")
