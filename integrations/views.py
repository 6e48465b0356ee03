"""Slack's endpoints: the Events API (app_mention, message.im) and the slash command."""

from __future__ import annotations

import json

from django.core.cache import cache
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from integrations.models import SlackThread
from integrations.slack.signature import request_is_from_slack
from integrations.slack.web import client
from integrations.tasks import handle_slack_message

REFUSED = "the request is not signed with this app's signing secret, or is older than 5 minutes"


def _enqueue(**message: str) -> None:
    transaction.on_commit(lambda: handle_slack_message.delay(**message))


@csrf_exempt
@require_POST
def events(request: HttpRequest) -> HttpResponse:
    if not request_is_from_slack(request):
        return JsonResponse({"error": REFUSED}, status=401)
    try:
        payload = json.loads(request.body)
    except ValueError:
        return JsonResponse({"error": "the body is not JSON"}, status=400)
    if payload.get("type") == "url_verification":
        return JsonResponse({"challenge": payload.get("challenge", "")})
    event = payload.get("event") or {}
    # Slack retries a delivery it thinks failed; each event is handled once.
    event_id = payload.get("event_id", "")
    if event_id and not cache.add(f"slack:event:{event_id}", 1, timeout=3600):
        return HttpResponse(status=200)
    from_a_person = not event.get("bot_id") and not event.get("subtype")
    direct = event.get("type") == "message" and event.get("channel_type") == "im"
    in_our_thread = event.get("type") == "message" and event.get("thread_ts")
    if from_a_person and (event.get("type") == "app_mention" or direct or in_our_thread):
        # Channel messages reach us only when subscribed; act on our threads only.
        if (
            in_our_thread
            and not direct
            and not SlackThread.objects.filter(
                channel_id=event.get("channel", ""), thread_ts=event["thread_ts"]
            ).exists()
            and event.get("type") != "app_mention"
        ):
            return HttpResponse(status=200)
        _enqueue(
            channel=event.get("channel", ""),
            user=event.get("user", ""),
            text=event.get("text", ""),
            ts=event.get("ts", ""),
            thread_ts=event.get("thread_ts", ""),
        )
    return HttpResponse(status=200)


@csrf_exempt
@require_POST
def command(request: HttpRequest) -> HttpResponse:
    """`/inspect repo:NAME do this`: answered at once; the session starts in a thread of the
    bot's own message."""
    if not request_is_from_slack(request):
        return JsonResponse({"error": REFUSED}, status=401)
    text = request.POST.get("text", "").strip()
    if not text:
        usage = "Usage: `/inspect repo:NAME what the agent should do`"
        return JsonResponse({"response_type": "ephemeral", "text": usage})
    channel = request.POST.get("channel_id", "")
    user = request.POST.get("user_id", "")
    # The thread to answer in: a message of ours quoting the request.
    posted = client().chat_postMessage(channel=channel, text=f"<@{user}> asked: {text}")
    _enqueue(channel=channel, user=user, text=text, ts=posted.get("ts", ""))
    return JsonResponse(
        {"response_type": "ephemeral", "text": "On it — follow along in the thread."}
    )
