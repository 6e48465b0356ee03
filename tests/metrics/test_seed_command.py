"""`manage.py inspect metrics seed`: bulk, consistent and deterministic."""

from __future__ import annotations

import json

import pytest
from django.db.models import Count, Max

from sessions.models import Event, PullRequest, ReviewEvent, Session

pytestmark = pytest.mark.django_db


def test_seed_makes_what_it_is_asked_for(inspect_cli):
    code, out, err = inspect_cli("metrics", "seed", "--sessions", "200", "--events", "3000",
                                 "--prs", "90", "--repositories", "4", "--json")  # fmt: skip
    assert code == 0, err
    made = json.loads(out.strip().splitlines()[-1])
    assert made["sessions"] == Session.objects.count() == 200
    assert made["events"] == Event.objects.count() == 3000
    assert made["prs"] == PullRequest.objects.count() == 90
    assert made["reviews"] == ReviewEvent.objects.count() > 0
    assert made["repositories"] == 4


def test_seeded_event_logs_are_gap_free_and_match_last_seq(inspect_cli):
    inspect_cli("metrics", "seed", "--sessions", "50", "--events", "700", "--prs", "20")
    logs = Event.objects.values("session_id").annotate(n=Count("id"), top=Max("seq"))
    last_seq = dict(Session.objects.values_list("pk", "last_seq"))
    for log in logs:
        assert log["n"] == log["top"] == last_seq[log["session_id"]]
    merged = PullRequest.objects.filter(state="merged")
    assert merged.exists() and not merged.filter(merged_at=None).exists()
    assert not PullRequest.objects.filter(state="open", merged_at__isnull=False).exists()


def test_the_same_seed_gives_the_same_data(inspect_cli):
    inspect_cli(
        "metrics", "seed", "--sessions", "40", "--prs", "10", "--seed", "3", "--prefix", "a"
    )
    inspect_cli(
        "metrics", "seed", "--sessions", "40", "--prs", "10", "--seed", "3", "--prefix", "b"
    )

    def costs(prefix):
        sessions = Session.objects.filter(repository__name__startswith=f"{prefix}-")
        return list(sessions.order_by("pk").values_list("cost_usd", "retries", "start_ms"))

    assert costs("a") == costs("b")


def test_seeding_twice_with_one_prefix_is_refused_clearly(inspect_cli):
    assert inspect_cli("metrics", "seed", "--sessions", "5", "--prs", "1")[0] == 0
    code, _, err = inspect_cli("metrics", "seed", "--sessions", "5", "--prs", "1")
    assert code == 1 and "seed-repo-* exist already; seed with another --prefix" in err
    code, _, err = inspect_cli("metrics", "seed", "--sessions", "5", "--prs", "9", "--prefix", "x")
    assert code == 1 and "cannot exceed --sessions" in err
