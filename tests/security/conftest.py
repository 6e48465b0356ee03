from tests.approvals.conftest import agent_request, agent_session, client_for  # noqa: F401
