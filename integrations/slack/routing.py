"""Which repository a Slack message is about: an explicit `repo:NAME`, the channel's mapping,
keyword rules, then (if configured) a model's guess — or None: ask the person."""

from __future__ import annotations

import json
import logging
import re
import urllib.request

from django.conf import settings

from integrations.models import SlackChannelRoute, SlackKeywordRule
from sessions.agents import provider_accounts as accounts
from snapshots.models import Repository

log = logging.getLogger(__name__)
EXPLICIT = re.compile(r"\brepo:([a-z0-9][a-z0-9._-]*)", re.IGNORECASE)


def route(*, channel: str, text: str) -> Repository | None:
    explicit = EXPLICIT.search(text)
    if explicit:
        return Repository.objects.filter(name=explicit.group(1).lower()).first()
    mapped = SlackChannelRoute.objects.filter(channel_id=channel).select_related("repository")
    if mapped.exists():
        return mapped.first().repository
    words = set(re.findall(r"[\w.-]+", text.lower()))
    for rule in SlackKeywordRule.objects.select_related("repository"):
        if rule.keyword.lower() in words:
            return rule.repository
    if settings.SLACK_LLM_ROUTING and accounts.openai_key():
        return classify(text)
    return None


def classify(text: str) -> Repository | None:
    """Ask the OpenAI-compatible model (INSPECT_LLM_*, as in force) for one repository name
    or `unknown`."""
    names = list(Repository.objects.values_list("name", flat=True))
    if not names:
        return None
    body = {
        "model": accounts.default_model() or "gpt-4.1-mini",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "Answer with exactly one of these repository names, "
             f"or the word unknown if the request does not clearly name one: {', '.join(names)}"},
            {"role": "user", "content": text[:4000]},
        ],
    }  # fmt: skip
    request = urllib.request.Request(  # noqa: S310 - the configured model URL
        f"{accounts.openai_base_url()}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {accounts.openai_key()}",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310 - configured URL
            answer = json.loads(response.read())["choices"][0]["message"]["content"]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        log.warning("repository classifier failed: %s", exc)
        return None
    answer = answer.strip().strip("`'\". ").lower()
    return Repository.objects.filter(name=answer).first() if answer in names else None
