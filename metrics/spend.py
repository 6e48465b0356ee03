"""Model spend on the Metrics page: what the gateway metered this UTC day or month, by user,
repository, runtime and model (every request of every runtime, from gateway.ModelRequest).
Rendered at /metrics/spend/ and loaded into the Metrics page."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gateway.budgets import period_start
from gateway.models import Budget, ModelRequest
from metrics.scope import metrics_scope
from snapshots.models import Repository

GROUPS = {
    "user": ("user__username", "By user"),
    "repository": ("repository__name", "By repository"),
    "runtime": ("runtime", "By runtime"),
    "model": ("model", "By model"),
}
TOP = 20  # lines per group; the rest add up in "others"


@dataclass
class SpendLine:
    label: str
    usd: float
    requests: int
    input_tokens: int
    output_tokens: int
    share: float = 0.0  # of the period's total


@dataclass
class SpendReport:
    period: str  # day or month (UTC)
    since: datetime
    total_usd: float = 0.0
    requests: int = 0
    groups: list[tuple[str, str, list[SpendLine]]] = field(default_factory=list)


def spend_report(repositories: list[Repository], period: str = "month") -> SpendReport:
    """The period's spend in `repositories`: one grouped query per dimension."""
    since = period_start(period)
    report = SpendReport(period=period, since=since)
    rows = ModelRequest.objects.filter(
        repository_id__in=[r.pk for r in repositories], created_at__gte=since
    )
    totals = rows.aggregate(usd=Sum("cost_usd"), n=Count("id"))
    report.total_usd = float(totals["usd"] or 0.0)
    report.requests = totals["n"]
    for key, (column, title) in GROUPS.items():
        grouped = (
            rows.values(column)
            .annotate(
                usd=Sum("cost_usd"),
                n=Count("id"),
                input=Sum("input_tokens"),
                output=Sum("output_tokens"),
            )
            .order_by("-usd", column)
        )
        lines = [
            SpendLine(
                label=row[column] or "(unknown)",
                usd=float(row["usd"] or 0.0),
                requests=row["n"],
                input_tokens=row["input"] or 0,
                output_tokens=row["output"] or 0,
            )
            for row in grouped
        ]
        if len(lines) > TOP:
            rest = lines[TOP:]
            lines = lines[:TOP] + [
                SpendLine(
                    label=f"{len(rest)} others",
                    usd=sum(line.usd for line in rest),
                    requests=sum(line.requests for line in rest),
                    input_tokens=sum(line.input_tokens for line in rest),
                    output_tokens=sum(line.output_tokens for line in rest),
                )
            ]
        for line in lines:
            line.share = line.usd / report.total_usd if report.total_usd else 0.0
        report.groups.append((key, title, lines))
    return report


@login_required
def spend(request: HttpRequest) -> HttpResponse:
    """The spend fragment (managers and admins of the repositories it covers):
    ?repository=NAME&period=day|month."""
    scope = metrics_scope(request.user, repository=request.GET.get("repository", ""))
    period = request.GET.get("period", Budget.Period.MONTH)
    if period not in Budget.Period.values:
        return HttpResponse("period must be day or month", status=400)
    context = {"spend": spend_report(scope, period), "covers": scope}
    return render(request, "metrics/_spend.html", context)
