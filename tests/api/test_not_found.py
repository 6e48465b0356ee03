"""Anything under /api/ that is not an endpoint is a JSON 404 pointing at the schema, even a
path no route can match (a newline where an id goes), never the HTML error page."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path", ["/api/nothing/", "/api/approvals/%0A/decide/", "/api/sessions/%0A/events/"]
)
def test_an_unknown_api_path_is_a_json_404(team, api, path):
    response = api(team.engineer).post(path, {}, format="json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "the operations are listed at /api/schema/" in response.json()["detail"]


def test_a_repository_name_with_a_nul_is_a_404_not_a_crash(team, api):
    response = api(team.engineer).post("/api/repositories/%00/refresh/")
    assert response.status_code == 404
    assert "no repository named" in response.json()["detail"]
