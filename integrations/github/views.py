"""GitHub's endpoint: the App's webhook deliveries (routed at /webhooks/github/ by the project's
URLs)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from integrations.github.webhooks import webhook_receive


@csrf_exempt  # GitHub signs its deliveries instead (integrations.github.webhooks)
@require_POST
def webhook(request: HttpRequest) -> HttpResponse:
    """GitHub's deliveries: verified, de-duplicated and applied by webhook_receive."""
    answer = webhook_receive(
        event=request.headers.get("X-GitHub-Event", ""),
        delivery_id=request.headers.get("X-GitHub-Delivery", ""),
        signature=request.headers.get("X-Hub-Signature-256"),
        body=request.body,
        content_type=request.content_type or "",
    )
    return JsonResponse({"outcome": answer.outcome}, status=answer.status)
