"""Hook for ``tests/snapshots/sandbox/conformance``: the Modal backend as one of its parameters.

Use ``modal_backend_param()`` in the list of backends the suite is parametrised over, and
``make_modal_backend()`` where the suite builds the backend for the ``"modal"`` parameter. Without
``MODAL_TOKEN_ID`` the parameter is skipped with the reason "MODAL_TOKEN_ID not set".
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

from snapshots.sandbox.modal_backend import ModalBackend, modal_unconfigured_reason

# A separate app keeps conformance sandboxes apart from a deployment's real ones.
CONFORMANCE_APP = "inspect-web-conformance"


def modal_backend_param(environ: Mapping[str, str] | None = None):  # -> pytest ParameterSet
    """``pytest.param("modal")``, skipped unless the Modal token is in ``environ``."""
    reason = modal_unconfigured_reason(environ)
    return pytest.param(
        "modal",
        id="modal",
        marks=pytest.mark.skipif(reason is not None, reason=reason or "configured"),
    )


def make_modal_backend() -> ModalBackend:
    """The real Modal backend for the conformance suite (network; needs the token)."""
    app = os.environ.get("INSPECT_MODAL_CONFORMANCE_APP", CONFORMANCE_APP)
    return ModalBackend.from_env(app_name=app)
