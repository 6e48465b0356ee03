from tests.api.conftest import forget_stop_requests  # noqa: F401 - autouse fixture
