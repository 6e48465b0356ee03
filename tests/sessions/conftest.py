"""Session fixtures live in tests/conftest.py (the browser tests share them); the reviewed change
of the diff view is in review_fixtures.py."""

from tests.sessions.review_fixtures import reviewed_change  # noqa: F401
