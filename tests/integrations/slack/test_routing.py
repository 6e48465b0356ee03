"""Routing: explicit `repo:`, channel mapping, keyword rules, the model, else ask."""

import pytest

from integrations.models import SlackChannelRoute, SlackKeywordRule, SlackUser
from integrations.slack.conversation import handle_message
from integrations.slack.routing import route
from sessions.models import Session

pytestmark = pytest.mark.django_db


def test_each_rule_in_order(team, fake_slack, settings):
    SlackChannelRoute.objects.create(channel_id="CWIDGETS", repository=team.repository)
    SlackKeywordRule.objects.create(keyword="gizmo", repository=team.other_repository)
    assert route(channel="CWIDGETS", text="repo:gadgets fix it") == team.other_repository
    assert route(channel="CWIDGETS", text="the gizmo page is slow") == team.repository
    assert route(channel="COTHER", text="the Gizmo page is slow") == team.other_repository
    assert route(channel="COTHER", text="something vague") is None

    settings.SLACK_LLM_ROUTING = True
    settings.LLM_API_KEY = "sk-test"
    settings.LLM_BASE_URL = fake_slack.url.replace("/api/", "/v1")
    fake_slack.model_answer = "widgets"
    assert route(channel="COTHER", text="the sprocket widget crashes") == team.repository
    asked = fake_slack.of("completions")[-1]
    assert asked["auth"] == "Bearer sk-test"
    assert "gadgets, widgets" in asked["body"]["messages"][0]["content"]
    fake_slack.model_answer = "unknown"
    assert route(channel="COTHER", text="something vague") is None


def test_unknown_repository_means_asking_in_the_thread(team, fake_slack):
    SlackUser.objects.create(slack_user_id="UENG", user=team.engineer)
    handle_message(channel="C1", user="UENG", text="<@UBOT> fix it", ts="111.1")
    asked = fake_slack.of("chat.postMessage")[-1]["body"]
    assert asked["thread_ts"] == "111.1" and asked["channel"] == "C1"
    assert "Which repository is this for?" in asked["text"] and "widgets" in asked["text"]
    assert not Session.objects.exists()


def test_unknown_people_and_non_members_cannot_start_sessions(team, fake_slack):
    handle_message(channel="C1", user="USTRANGER", text="repo:widgets fix it", ts="1.1")
    assert "I don't know who you are" in fake_slack.of("chat.postMessage")[-1]["body"]["text"]
    fake_slack.emails["UOUT"] = "out@example.com"
    team.outsider.email = "out@example.com"
    team.outsider.save()
    handle_message(channel="C1", user="UOUT", text="repo:widgets fix it", ts="2.2")
    assert SlackUser.objects.get(slack_user_id="UOUT").user == team.outsider  # found by email
    assert "Which repository" in fake_slack.of("chat.postMessage")[-1]["body"]["text"]
    fake_slack.emails["UREV"] = "rev@example.com"
    team.reviewer.email = "rev@example.com"
    team.reviewer.save()
    handle_message(channel="C1", user="UREV", text="repo:widgets fix it", ts="3.3")
    said = fake_slack.of("chat.postMessage")[-1]["body"]["text"]
    assert "could not start a session in widgets" in said and "does not allow this" in said
    assert not Session.objects.exists()
