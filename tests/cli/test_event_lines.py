"""What `inspect watch` prints for the events a person follows a session by."""

from inspect_web.cli import Terminal, describe


def line(kind: str, payload: dict, base_url: str = "http://inspect.test") -> str | None:
    return describe({"seq": 12, "kind": kind, "payload": payload}, Terminal(), base_url)


def test_state_changes_and_the_pull_request_link_are_shown():
    assert line("state", {"from": "verifying", "to": "idle"}).endswith("state verifying → idle")
    assert line("stop_requested", {"by": "ada"}).endswith("stop requested by ada")
    opened = line("pull_request_published", {"pull_request": 1, "opened": True,
                                             "pr_url": "/sessions/3/#pull-request"})  # fmt: skip
    assert opened.endswith("pull request opened: http://inspect.test/sessions/3/#pull-request")
    updated = line(
        "pull_request_published", {"pr_url": "https://github.example/o/r/pull/9", "opened": False}
    )
    assert updated.endswith("pull request updated: https://github.example/o/r/pull/9")
    merged = line("pull_request_merged", {"pull_request": 1, "sha": "abc"})
    assert merged.endswith("pull request merged")
    assert line("turn_finished", {"turn": 1, "timings": {}}) is None
    assert line("heartbeat", {"n": 1}) is None


def test_screenshots_link_to_the_image_and_terminal_input_names_the_typist():
    shot = line(
        "screenshot", {"label": "after", "path": "/", "url": "/sessions/3/screenshots/a.png"}
    )
    assert shot.endswith("screenshot after of /: http://inspect.test/sessions/3/screenshots/a.png")
    typed = line("terminal", {"user": "engineer", "input": "ls \x1b]0;title\x07"})
    assert typed.endswith("engineer typed: ls ^[]0;title^G")


def test_each_metered_model_request_is_a_line_and_a_refusal_says_why():
    usage = {"request": 4, "model": "claude-sonnet-4-5", "input_tokens": 2200,
             "output_tokens": 80, "cost_usd": 0.0051, "latency_ms": 850.4, "status": 200,
             "outcome": "ok", "message": ""}  # fmt: skip
    assert line("model_request", usage).endswith(
        "model claude-sonnet-4-5: 2200 in / 80 out, $0.0051, 850 ms"
    )
    refused = {**usage, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "status": 403,
               "outcome": "refused_policy",
               "message": "gpt-5 is not allowed in widgets"}  # fmt: skip
    assert line("model_request", refused).endswith(
        "403 refused_policy: gpt-5 is not allowed in widgets"
    )
    assert "unpriced" in line("model_request", {**usage, "cost_usd": None})


def test_a_budget_pause_and_its_end_say_which_budget_and_where_to_raise_it():
    message = "Paused: the daily budget of user ada is spent. An admin can raise it at /budgets/"
    paused = line("budget_paused", {"message": message})
    assert "budget paused: Paused: the daily budget of user ada" in paused and "/budgets/" in paused
    resumed = line(
        "budget_resumed", {"message": "Resumed: the daily budget of user ada was raised"}
    )
    assert resumed.endswith("budget resumed: Resumed: the daily budget of user ada was raised")
