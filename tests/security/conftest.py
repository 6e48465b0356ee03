from tests.api.conftest import api, forget_stop_requests, token_for  # noqa: F401
from tests.approvals.conftest import agent_request, agent_session, client_for  # noqa: F401
from tests.gateway.conftest import fresh_upstream, gateway, mint, start_gateway, upstream  # noqa: F401
from tests.integrations.github.conftest import app_key, deliver, github_pr, github_server  # noqa: F401
from tests.integrations.slack.conftest import fake_slack  # noqa: F401
from tests.sessions.agents.conftest import fake_model  # noqa: F401
from tests.sessions.agents.gateway_fixtures import gateway_boxes, platform_gateway  # noqa: F401
from tests.sessions.preview.test_preview_websockets import ws_session  # noqa: F401
from tests.sessions.pulls.conftest import publishing  # noqa: F401
from tests.sessions.review_fixtures import reviewed_change  # noqa: F401
from tests.sessions.terminal.conftest import cookies, live_session, terminal_daphne  # noqa: F401
