"""The built-in agent's conversation as it is stored and sent: the transcript's entries, how
a turn leaves it for the next one, and compaction (the summary the model writes of older turns
when a request nears the model's context, and what stays verbatim beside it)."""

from __future__ import annotations

import json

from inspect_web.text import cut, shorten
from sessions.agents.base import Turn
from sessions.agents.llm import Entry, user_text

SUMMARY_SYSTEM = """\
You summarise a coding agent's conversation so that the agent can continue the work from your \
summary alone. Keep: the task and every request made (with who asked), the decisions taken and \
why, every file created, changed or deleted, the commands that matter and their outcome, and \
the open problems and next steps. Be concise and factual; no preamble.
"""
SUMMARY_HEADER = "Summary of the earlier conversation in this session (it replaces those turns):"
# Compaction starts when a request would fill this share of the context; the current turn's
# newest steps kept verbatim may fill at most KEEP_SHARE of it.
COMPACT_SHARE = 0.75
KEEP_SHARE = 0.3
CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1600  # about what one image costs a provider (Anthropic: ~1.15 MP / 750)
TOOL_RESULT_CHARS_IN_SUMMARY = 2000


def user_entry(turn: Turn) -> Entry:
    """The transcript entry of a turn's prompt: who asked, and placeholders for its images
    (their bytes are sent with this turn's requests only, never stored)."""
    entry: Entry = {
        "role": "user",
        "text": turn.prompt,
        "author": {"username": turn.author.username, "name": turn.author.name},
    }
    if turn.images:
        entry["images"] = [{"name": i.name, "media_type": i.media_type} for i in turn.images]
    return entry


def close_transcript(transcript: list[Entry], note: str) -> None:
    """Leave the transcript as the next request needs it: every tool call answered, and the
    turn closed by an assistant entry (`note` says how it ended) so that the next prompt
    follows the agent's last word."""
    last = next(
        (i for i in range(len(transcript) - 1, -1, -1) if transcript[i]["role"] == "assistant"),
        None,
    )
    if last is not None and transcript[last].get("tool_calls"):
        answered = {e.get("call_id") for e in transcript[last + 1 :] if e["role"] == "tool"}
        for call in transcript[last]["tool_calls"]:
            if call["id"] not in answered:
                transcript.append(
                    {
                        "role": "tool",
                        "call_id": call["id"],
                        "name": call["name"],
                        "content": "error: not run; the turn ended before this call ran",
                        "is_error": True,
                    }
                )
    if not transcript:
        return
    end = transcript[-1]
    if end["role"] != "assistant" or end.get("tool_calls"):
        transcript.append({"role": "assistant", "text": note or "(The turn ended.)"})


def summary_request(summary: str, entries: list[Entry], max_chars: int) -> Entry:
    """One user message asking for a summary of `entries` (and the summary before them),
    rendered as plain text so that the request needs no tools."""
    lines = []
    for entry in entries:
        if entry["role"] == "user":
            lines.append("USER: " + user_text(entry))
        elif entry["role"] == "assistant":
            if entry.get("text"):
                lines.append("AGENT: " + entry["text"])
            for call in entry.get("tool_calls") or []:
                lines.append(f"AGENT CALLED {call['name']}: {call['arguments']}")
        else:
            content = entry.get("content") or ""
            content = cut(content, TOOL_RESULT_CHARS_IN_SUMMARY, 0).joined(" […]")
            status = "FAILED" if entry.get("is_error") else "RESULT"
            lines.append(f"{status} of {entry.get('name')}: {content}")
    text = "\n".join(lines)
    # The task (first) and the newest work (last) matter most.
    text = shorten(
        text, max_chars, head=max_chars // 4, marker="\n[… {omitted:,} characters omitted …]\n"
    )
    earlier = f"The summary of what came before:\n{summary}\n\n" if summary else ""
    return {
        "role": "user",
        "text": f"{earlier}The conversation to summarise:\n\n{text}\n\nWrite the summary "
        "now: the task, decisions, files touched and open problems.",
    }


def split_for_summary(
    transcript: list[Entry], prompt_entry: Entry, budget_chars: float
) -> tuple[list[Entry], list[Entry]]:
    """(what the summary replaces, what stays verbatim): the turns before the current prompt
    go; if the current turn alone is over `budget_chars`, its older steps go too."""
    at = next(i for i, e in enumerate(transcript) if e is prompt_entry)
    dropped, kept = transcript[:at], transcript[at:]
    current = kept[1:]
    kept_chars = sum(len(json.dumps(e)) for e in kept)
    if kept_chars > budget_chars:
        # The current turn's older steps go too; a cut falls before an assistant entry so
        # that each tool call keeps its result. The newest step always stays.
        starts = [i for i, e in enumerate(current) if e["role"] == "assistant"]
        cut = starts[-1] if starts else 0
        for i in starts:
            if sum(len(json.dumps(e)) for e in current[i:]) <= budget_chars:
                cut = i
                break
        dropped, kept = dropped + current[:cut], [prompt_entry, *current[cut:]]
    return dropped, kept
