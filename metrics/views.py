"""The Metrics page (and its CSV) and the review panel's review-time ping."""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from accounts import access
from metrics.figures import PERIODS, MetricsReport
from metrics.presentation import csv_rows, report_display
from metrics.review_time import REVIEW_PING_SECONDS, review_time_record
from metrics.rollup_read import current_metrics_report
from metrics.scope import metrics_repositories, metrics_scope, parse_range
from sessions.models import PullRequest


@login_required
def metrics(request: HttpRequest) -> HttpResponse:
    """The Metrics page (managers and admins): ?repository=&period=day|week&start=&end=,
    ?format=csv for the same figures as CSV. An htmx request gets the figures only."""
    allowed = metrics_repositories(request.user)
    filters = {
        "repository": request.GET.get("repository", ""),
        "period": request.GET.get("period", "week"),
        "start": request.GET.get("start", ""),
        "end": request.GET.get("end", ""),
    }
    scope = metrics_scope(request.user, repository=filters["repository"], allowed=allowed)
    context = {"repositories": allowed, "filters": filters, "error": ""}
    try:
        if filters["period"] not in PERIODS:
            raise ValueError("Period must be day or week.")
        start, end = parse_range(filters["start"], filters["end"])
    except ValueError as exc:
        context["error"] = str(exc)
        status = 400
    else:
        status = 200
        filters.update(start=start.isoformat(), end=end.isoformat())
        report = current_metrics_report(
            repositories=scope, period=filters["period"], start=start, end=end
        )
        if request.GET.get("format") == "csv":
            return _metrics_csv(report)
        context.update(report=report, **report_display(report))
        context["csv_query"] = urlencode({**filters, "format": "csv"})
    template = "metrics/_figures.html" if request.htmx else "metrics.html"
    return render(request, template, context, status=status)


def _metrics_csv(report: MetricsReport) -> HttpResponse:
    scope = report.repositories[0].name if len(report.repositories) == 1 else "all"
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="metrics-{scope}-{report.period}-{report.start}-{report.end}.csv"'
    )
    csv.writer(response).writerows(csv_rows(report))
    return response


@login_required
@require_POST
def review_time(request: HttpRequest, pr_id: int) -> HttpResponse:
    """The review panel's ping: time on a PR's review page counts as reviewer effort.
    Members of the PR's repository only (404 otherwise); 204, nothing to swap."""
    pull_request = access.get_visible_or_404(request.user, PullRequest.objects, pk=pr_id)
    try:
        seconds = int(request.POST.get("seconds", REVIEW_PING_SECONDS))
    except ValueError:
        return HttpResponse("seconds must be a whole number", status=400)
    review_time_record(user=request.user, pull_request=pull_request, seconds=seconds)
    return HttpResponse(status=204)
