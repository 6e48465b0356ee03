"""A command agent that writes a three-line file in a work session and, asked for a review,
answers with a fenced ```json review (or what a test gives it)."""

from __future__ import annotations

import json
import shlex

REVIEW = {
    "summary": "Two things to fix before merging.",
    "comments": [
        {"path": "greeting.txt", "line": 1, "body": "Say hello to the reader by name."},
        {"path": "greeting.txt", "line": 3, "body": "This line is a typo."},
    ],
}


def review_message(review: dict | str = REVIEW) -> str:
    block = review if isinstance(review, str) else json.dumps(review)
    return f"The change looks small.\n\n```json\n{block}\n```"


def agent(message: str | None = None) -> str:
    """The command: the work turn writes greeting.txt; the review turn says `message`."""
    line = json.dumps({"kind": "message", "data": {"text": message or review_message()}})
    return (
        f'case "$INSPECT_PROMPT" in Review*) printf "%s\\n" {shlex.quote(line)};; '
        '*) printf "hello\\nworld\\nhelo\\n" > greeting.txt;; esac'
    )
