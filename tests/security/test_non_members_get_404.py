"""Every URL that takes an id answers 404 to a logged-in non-member (invariant 6).

The URLs are generated from the URL resolver, not kept by hand: every pattern with a parameter
is filled with the ids of objects of a repository the user is not a member of (`FILL`, by the
route's prefix), so a new URL is covered by default. A route that cannot be filled fails the
test until it is filled or listed in `EXCLUDED` with a reason."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from api.tokens import token_create
from approvals import audit
from automations.services import automation_create
from gateway.metering import Exchange, record
from gateway.models import Budget
from sessions import model_access
from sessions.events import append_events
from sessions.models import Attachment, Event, PullRequest
from snapshots.models import Snapshot

# Route prefixes whose URLs take no object of a repository, with the reason.
EXCLUDED = {
    "admin/": "Django admin: staff only, and its object ids are paths (`<path:object_id>`)",
    "accounts/": "allauth's sign-in, e-mail and password pages: keys of the visitor, no object",
    "invitations/": "the link's token is its own credential (no object id); tested in "
    "tests/settings_area/test_people.py",
}
# Which object fills a route's id, by the longest matching route prefix.
FILL = {
    "sessions/": "session",
    "sessions/^attachments/": "attachment",
    "api/sessions/": "session",
    "snapshots/": "snapshot",
    "snapshots/refresh/": "repository",
    "api/repositories/": "repository",
    "approvals/": "approval",
    "api/approvals/": "approval",
    "approvals/audit/": "entry",
    "automations/": "automation",
    "account/tokens/": "token",
    "metrics/review-time/": "pull_request",
    "budgets/": "budget",  # site admins only: 404 for anyone else
    "repositories/": "repository",
    "settings/repositories/": "repository",  # the settings area: admins of the repository
}
# A parameter that is not the object's id, by name: (for the object, for one that does not exist),
# given the objects and which of them the route takes.
OTHER = {
    "key": lambda o, what: ("0" * 32, "0" * 32),
    "name": lambda o, what: (
        (o["attachment"].name,) * 2 if what == "attachment" else (o["artifact"],) * 2
    ),
    "path": lambda o, what: ("index.html", "index.html"),
    "folder": lambda o, what: (o["attachment"].folder, "f" * 32),
    "request_pk": lambda o, what: (str(o["model_request"].pk), str(MISSING_ID)),
    "user_id": lambda o, what: (
        str(o["repository"].memberships.order_by("pk").first().user_id),
        str(MISSING_ID),
    ),
}
MISSING_ID = 987_654


@dataclass(frozen=True)
class Route:
    route: str  # the resolver's pattern text, prefixes joined
    name: str
    pattern: URLPattern
    params: tuple[str, ...]


def _routes(patterns=None, prefix: str = "", namespace: str = "") -> list[Route]:
    found = []
    for p in get_resolver().url_patterns if patterns is None else patterns:
        text = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            inner = f"{namespace}{p.namespace}:" if p.namespace else namespace
            found += _routes(p.url_patterns, text, inner)
        elif p.pattern.regex.groupindex:
            params = tuple(p.pattern.regex.groupindex)
            found.append(Route(text, f"{namespace}{p.name}", p, params))
    return found


def _excluded(route: Route) -> bool:
    return any(route.route.startswith(prefix) for prefix in EXCLUDED) or (
        route.route.startswith("api/^") and route.params == ("path",)  # the API's catch-all 404
    )


def _fill(route: Route, objects: dict) -> tuple[str, str]:
    """(url of the non-member's object, url of an object that does not exist)."""
    prefixes = [p for p in FILL if route.route.startswith(p)]
    assert prefixes, f"{route.route} ({route.name}): add its prefix to FILL or EXCLUDED"
    what = FILL[max(prefixes, key=len)]
    real, missing = [], []
    url = route.route.replace("^", "").replace("$", "")
    for param in route.params:
        if what == "repository" and param in ("name", "repository"):
            values = (objects["repository"].name, "no-such-repository")
        elif param in OTHER:
            values = OTHER[param](objects, what)
        elif what == "repository":
            values = (objects["repository"].name, "no-such-repository")
        else:
            values = (str(objects[what].pk), str(MISSING_ID))
        real.append(values[0])
        missing.append(values[1])
    return _render(route, url, real), _render(route, url, missing)


def _render(route: Route, url: str, values: list[str]) -> str:
    for param, value in zip(route.params, values, strict=True):
        # `<int:pk>`/`<pk>` (path()) or `(?P<pk>...)` (re_path()).
        url = _replace_param(url, param, value)
    return "/" + url


def _replace_param(url: str, param: str, value: str) -> str:
    url = re.sub(rf"<(?:\w+:)?{param}>", value, url)
    return re.sub(rf"\(\?P<{param}>(?:[^()]|\([^()]*\))*\)", value, url)


@pytest.fixture
def objects(team, agent_session, agent_request):
    snapshot = Snapshot.objects.create(repository=team.repository, branch="main", log="secret log")
    entry = audit.record("test.mine", actor=team.reviewer, session=agent_session, data={})
    big = "x" * 100_000
    append_events(agent_session.pk, [("output", {"stream": "stdout", "text": big})])
    capped = Event.objects.filter(session=agent_session, kind="output").latest("seq").payload
    token = model_access.mint(agent_session, agent_session.prompt, "builtin")
    model_request = record(
        Exchange(
            access=model_access.active(token), provider="openai", endpoint="chat.completions",
            model="gpt-4.1", stream=False, status=200, outcome="ok",
            request_body=b'{"model": "gpt-4.1"}', response_body=b'{"choices": []}',
            input_tokens=10, output_tokens=2,
        )
    )  # fmt: skip
    return {
        "session": agent_session,
        "approval": agent_request,
        "snapshot": snapshot,
        "entry": entry,
        "repository": team.repository,
        "budget": Budget.objects.create(scope="site", period="day", limit_usd=5),
        "automation": automation_create(
            repository=team.repository, creator=team.engineer, name="nightly", prompt="tidy",
            cron="0 3 * * *",
        ),
        "token": token_create(user=team.engineer, name="theirs")[0],
        "pull_request": PullRequest.objects.create(
            session=agent_session, repository=team.repository, branch="inspect/1", base="main",
            title="theirs", head_sha="a" * 40,
        ),
        "attachment": Attachment.objects.create(
            folder="a" * 32, name="shot.png", session=agent_session
        ),
        "artifact": capped["artifact"].rsplit("/", 1)[-1],
        "model_request": model_request,
    }  # fmt: skip


def test_every_route_with_a_parameter_is_filled_or_excluded_with_a_reason(objects):
    routes = [r for r in _routes() if not _excluded(r)]
    assert len(routes) > 20
    for route in routes:
        _fill(route, objects)  # fails naming the route that FILL does not cover


def test_a_non_member_gets_404_for_every_object(objects, team, client_for, api):
    browser, token_client = client_for(team.outsider), api(team.outsider)
    body = {"decision": "approve", "text": "hi", "approve": True, "seconds": "5"}
    checked = []
    for route in (r for r in _routes() if not _excluded(r)):
        url, missing = _fill(route, objects)
        client = token_client if url.startswith("/api/") else browser
        statuses = {}
        for method in ("get", "post"):
            theirs = getattr(client, method)(url, body).status_code
            # What another repository's object answers is what a missing one answers.
            assert theirs == getattr(client, method)(missing, body).status_code, (method, url)
            statuses[method] = theirs
        assert 404 in statuses.values(), (url, statuses)
        assert set(statuses.values()) <= {404, 405}, (url, statuses)
        checked.append(route.name)
    assert {
        "sessions:detail", "sandbox:artifact", "api-session", "api-token-revoke",
        "model_requests:list", "model_requests:detail",
    } <= set(checked)  # fmt: skip
    objects["approval"].refresh_from_db()
    assert objects["approval"].state == "pending"
    assert objects["session"].prompts.count() == 1
    objects["automation"].refresh_from_db()
    assert not objects["automation"].paused
    objects["token"].refresh_from_db()
    assert objects["token"].revoked_at is None


# For a member a GET must get past the 404, except where nothing is there to show.
MEMBER_GET_EXCLUDED = {
    "sandbox:screenshot": "no screenshot was taken: 404 for a member too",
    "sandbox:preview-root": "no preview runs: 404 for a member too",
    "sandbox:preview": "no preview runs: 404 for a member too",
    "sessions:attachment": "no file is stored for the attachment row: 404 for a member too",
    "api-event-stream": "a member's GET streams until the session ends",
    "api-token-revoke": "a token is its owner's alone: 404 for anyone else, admins included",
}


def test_a_member_reaches_the_same_urls(objects, team, client_for, api):
    browser, token_client = client_for(team.admin), api(team.admin)
    for route in (r for r in _routes() if not _excluded(r)):
        if route.name in MEMBER_GET_EXCLUDED:
            continue
        url, _ = _fill(route, objects)
        client = token_client if url.startswith("/api/") else browser
        assert client.get(url).status_code != 404, url


def test_the_audit_page_filtered_by_another_repositorys_session_shows_nothing(
    objects, team, client_for
):
    page = client_for(team.outsider).get("/approvals/audit/", {"session": objects["session"].pk})
    assert "test.mine" not in page.content.decode()
