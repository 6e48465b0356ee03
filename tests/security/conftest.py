from tests.api.conftest import api, forget_stop_requests, token_for  # noqa: F401
from tests.approvals.conftest import agent_request, agent_session, client_for  # noqa: F401
from tests.terminal.conftest import live_session, terminal_daphne  # noqa: F401
