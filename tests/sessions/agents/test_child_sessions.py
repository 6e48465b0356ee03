"""The built-in agent can fan work out into child sessions, within a depth limit and a cap per
repository."""

import pytest

from sessions.agents.children import ChildPolicy
from tests.sessions.agents.conftest import (
    chat_message,
    chat_tool_calls,
    make_turn,
    of_kind,
    openai_agent,
)


class Tree(ChildPolicy):
    """Sessions in memory; the rules under test are ChildPolicy's."""

    def __init__(self, depth=0, **limits):
        super().__init__(**{"max_depth": 2, "max_per_repository": 2, **limits})
        self._depth = depth
        self.children: dict[int, dict] = {}

    def depth(self):
        return self._depth

    def live_children(self, repository):
        return sum(
            1 for c in self.children.values()
            if c["repository"] == repository and c["state"] == "running"
        )  # fmt: skip

    def create_child(self, repository, prompt):
        child = {"id": 100 + len(self.children), "repository": repository, "state": "running"}
        self.children[child["id"]] = {**child, "prompt": prompt}
        return child

    def child_status(self, session_id):
        return self.children.get(session_id)


def test_the_agent_spawns_children_and_checks_on_them(fake_model, sandbox):
    tree = Tree()
    fake_model.push(
        chat_tool_calls(
            ("spawn_session", {"repository": "widgets", "prompt": "port module a"}),
            ("spawn_session", {"repository": "widgets", "prompt": "port module b"}),
            ("spawn_session", {"repository": "widgets", "prompt": "port module c"}),
        ),
        chat_tool_calls(
            ("session_status", {"session_id": 100}), ("session_status", {"session_id": 7})
        ),
        chat_message("Two sessions are porting a and b."),
    )
    events = list(openai_agent(fake_model).run(make_turn(sandbox, children=tree)))

    results = of_kind(events, "tool_result")
    assert [r["ok"] for r in results] == [True, True, False, True, False]
    assert results[0]["child"] == {"id": 100, "repository": "widgets", "state": "running"}
    assert results[2]["output"] == (
        "this session already has 2 child sessions working on widgets (the cap is 2); "
        "wait for one with session_status"
    )
    assert results[3]["child"]["prompt"] == "port module a"
    assert results[4]["output"] == "session 7 is not a session this one started"
    tools = [t["function"]["name"] for t in fake_model.requests[0].body["tools"]]
    assert tools[-2:] == ["spawn_session", "session_status"]
    assert "spawn_session" in fake_model.requests[0].body["messages"][0]["content"]


def test_a_session_at_the_depth_limit_may_not_spawn():
    with pytest.raises(Exception, match="nest at most 2 deep"):
        Tree(depth=2).spawn("widgets", "more")
    assert Tree(depth=1).spawn("widgets", "more")["id"] == 100


def test_without_a_children_interface_the_tools_are_not_offered(fake_model, sandbox):
    fake_model.push(
        chat_tool_calls(("spawn_session", {"repository": "widgets", "prompt": "x"})),
        chat_message("ok"),
    )
    events = list(openai_agent(fake_model).run(make_turn(sandbox)))
    assert "there is no tool named 'spawn_session'" in of_kind(events, "error")[0]["message"]
    tools = [t["function"]["name"] for t in fake_model.requests[0].body["tools"]]
    assert "spawn_session" not in tools


@pytest.mark.django_db
def test_children_are_real_sessions_linked_to_their_parent(ready_repo, team):
    from sessions import services
    from sessions.children import SessionChildren

    parent = services.session_create(
        repository=ready_repo, creator=team.engineer, prompt="big job", agent_command="true"
    )
    children = SessionChildren(parent, user=team.engineer, max_depth=1, max_per_repository=1)
    child = children.spawn("widgets", "part one")
    assert parent.children.get().pk == child["id"]
    assert children.status(child["id"])["state"] == "queued"
    with pytest.raises(Exception, match="the cap is 1"):
        children.spawn("widgets", "part two")
    with pytest.raises(Exception, match="no repository named 'gadgets'"):
        children.spawn("gadgets", "elsewhere")
    grandchildren = SessionChildren(
        parent.children.get(), user=team.engineer, max_depth=1, max_per_repository=5
    )
    with pytest.raises(Exception, match="nest at most 1 deep"):
        grandchildren.spawn("widgets", "deeper")
