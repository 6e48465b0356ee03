"""Pull request fixtures (GitHub's are in tests/integrations/github/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def publishing(settings, ready_repo):
    """`widgets` (a local repository) with automatic pull requests on."""
    settings.AUTO_PULL_REQUEST = True
    # A non-bare upstream with `main` checked out accepts pushes to it, like a bare one.
    ready_repo.upstream.git("config", "receive.denyCurrentBranch", "updateInstead")
    return ready_repo
