from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from accounts import access, roles
from approvals.gate import ApprovalError
from sessions import ci_fixes, rendering, review_agent, review_comments, services
from sessions.agents import RUNTIME_NAMES
from sessions.diff_review import diff_files_viewed
from sessions.forms import ATTACHMENTS, IMAGE_SUFFIXES, NewSessionForm
from sessions.models import Attachment, CIFix, Session, State
from sessions.pulls import request_merge
from snapshots.tasks import prewarm

PAGE_EVENTS = 300


def _sessions_for(request: HttpRequest):
    sessions = access.visible_to(
        request.user, Session.objects.select_related("repository", "creator")
    )
    filters = {
        "mine": request.GET.get("mine") == "1",
        "repository": request.GET.get("repository", ""),
        "state": request.GET.get("state", ""),
        "author": request.GET.get("author", ""),
        "q": request.GET.get("q", "").strip(),
    }
    if filters["mine"]:
        sessions = sessions.filter(Q(creator=request.user) | Q(prompts__author=request.user))
    if filters["repository"]:
        sessions = sessions.filter(repository__name=filters["repository"])
    if filters["state"]:
        sessions = sessions.filter(state=filters["state"])
    if filters["author"]:
        sessions = sessions.filter(prompts__author__username=filters["author"])
    if filters["q"]:
        sessions = sessions.filter(
            Q(title__icontains=filters["q"]) | Q(prompts__text__icontains=filters["q"])
        )
    return sessions.distinct(), filters


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    sessions, filters = _sessions_for(request)
    context = {
        "sessions": sessions[:200],
        "filters": filters,
        "repositories": access.repositories_for(request.user),
        "states": State.choices,
        "authors": get_user_model()
        .objects.filter(memberships__repository__in=access.repositories_for(request.user))
        .distinct()
        .order_by("username"),
    }
    if request.htmx:
        return render(request, "sessions/_table.html", context)
    return render(request, "sessions/list.html", context)


@login_required
def session_new(request: HttpRequest) -> HttpResponse:
    repositories = access.repositories_for(request.user, permission=roles.START_SESSION).filter(
        archived_at__isnull=True
    )
    form = NewSessionForm(request.POST or None, request.FILES or None, repositories=repositories)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():  # the images belong to the session from its first moment
                session = services.session_create(
                    repository=data["repository"],
                    creator=request.user,
                    prompt=form.prompt_with_attachments(),
                    agent=data["agent"],
                    agent_command=data["agent_command"],
                    model=data["model"].strip(),
                    branch=data["branch"] or None,
                )
                form.attach_to(session, uploaded_by=request.user)
        except services.SessionError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(session)
    return render(
        request, "sessions/new.html", {"form": form, "has_repositories": repositories.exists()}
    )


@login_required
@require_POST
def session_prewarm(request: HttpRequest) -> HttpResponse:
    """Typing in the prompt restores a sandbox for this user and repository ahead of time."""
    repository = (
        access.repositories_for(request.user, permission=roles.START_SESSION)
        .filter(pk=request.POST.get("repository") or 0, archived_at__isnull=True)
        .first()
    )
    if repository is None:
        return JsonResponse({"prewarming": False}, status=404)
    user_id = request.user.pk
    transaction.on_commit(lambda: prewarm.delay(user_id, repository.pk))
    return JsonResponse({"prewarming": True})


@login_required
def session_attachment(request: HttpRequest, folder: str, name: str) -> HttpResponse:
    """An image attached to a session's prompt, for members of that session's repository (and,
    for a stored file that belongs to no session, site admins). Where the link is quoted does
    not matter: a link in one's own prompt to another repository's image grants nothing."""
    attachment = Attachment.objects.filter(folder=folder, name=name).first()
    if attachment is None or attachment.session_id is None:
        allowed = request.user.is_superuser  # no owner to ask: site admins only
    else:
        allowed = access.visible_to(request.user, Attachment.objects.filter(pk=attachment.pk))
        allowed = allowed.exists()
    content_type = IMAGE_SUFFIXES.get(name.rsplit(".", 1)[-1].lower())
    path = f"{ATTACHMENTS}/{folder}/{name}"
    if content_type is None or not allowed or not default_storage.exists(path):
        raise Http404("No attachment matches this address.")
    return FileResponse(default_storage.open(path), content_type=content_type)


@login_required
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = access.get_visible_or_404(
        request.user, Session.objects.select_related("repository", "creator", "snapshot"), pk=pk
    )
    return _detail_page(request, session)


def _detail_page(
    request: HttpRequest, session: Session, *, status: int = 200, **extra
) -> HttpResponse:
    """The session page; `extra`: what a refused form gets back (its input and the error)."""
    # seq is gap-free, so the newest page is a range on the (session, seq) index: no sort of
    # the whole log, whatever the planner's statistics say about a session still growing.
    events = list(session.events.filter(seq__gt=session.last_seq - PAGE_EVENTS).order_by("seq"))
    first_seq = events[0].seq if events else 0
    comments = review_comments.review_comments_for(session)
    context = {
        "session": session,
        "events_html": mark_safe(rendering.render_events(events)),  # noqa: S308 - escaped templates
        "first_seq": first_seq,
        "has_older": first_seq > 1,
        **rendering.panel_context(session),
        "agents": RUNTIME_NAMES,
        # This viewer's own marks, applied in the browser: the panel is the same for everyone.
        "diff_viewed": diff_files_viewed(session=session, user=request.user),
        "review_comments": comments,
        "review_drafts": sum(
            1 for c in comments if c.state == c.State.DRAFT and c.author_id == request.user.pk
        ),
        **extra,
    }
    return render(request, "sessions/detail.html", context, status=status)


@login_required
def session_older(request: HttpRequest, pk: int) -> HttpResponse:
    """Older log items, newest-first page before `before`, for scrolling back."""
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        return HttpResponse("before must be a seq number", status=400)
    events = list(
        session.events.filter(seq__lt=before, seq__gte=before - PAGE_EVENTS).order_by("seq")
    )
    html = rendering.render_events(events)
    html = f'<ol class="log older-page">{html}</ol>'
    if events and events[0].seq > 1:
        # An absolute address: a relative "?before=" would fetch the whole session page.
        url = reverse("sessions:older", args=[session.pk]) + f"?before={events[0].seq}"
        html = older_button(url) + html
    return HttpResponse(html)


def older_button(url: str) -> str:
    """The "Load older events" control: clicked, or seen as the reader scrolls the log up
    (`intersect`, since the log scrolls inside its own box, which `revealed` does not see)."""
    return format_html(
        '<button type="button" class="older" hx-get="{}" hx-trigger="click, intersect once" '
        'hx-swap="outerHTML">Load older events</button>',
        url,
    )


@login_required
@require_POST
def session_prompt(request: HttpRequest, pk: int) -> HttpResponse:
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    try:
        services.prompt_queue(
            session=session, author=request.user, text=request.POST.get("text", "")
        )
    except services.SessionError as exc:
        messages.error(request, str(exc))
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Prompt queued; it runs after the current turn.")
    return redirect(session)


@login_required
@require_POST
def session_stop(request: HttpRequest, pk: int) -> HttpResponse:
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    try:
        stopping = services.session_stop(session=session, user=request.user)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        if stopping:
            messages.success(request, "Stopping the running turn; partial work is kept.")
        else:
            messages.info(request, "Nothing is running in this session.")
    return redirect(session)


@login_required
@require_POST
def session_merge(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask for the session's pull request to be merged: it waits in the approvals inbox."""
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    pr = getattr(session, "pull_request", None)
    if pr is None:
        messages.error(request, "This session has no pull request yet.")
        return redirect(session)
    try:
        access.require_repo_permission(request.user, session.repository, roles.PROMPT_SESSION)
        approval = request_merge(pr, request.user)
    except (PermissionDenied, ApprovalError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Merge requested (approval #{approval.pk}); a reviewer decides in Approvals."
        )
    return redirect(session)


@login_required
@require_POST
def session_review_comment(request: HttpRequest, pk: int) -> HttpResponse:
    """Add a line comment to the user's review of a local repository's session (a draft
    until the review is submitted). Refused input comes back in the form with the reason."""
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    form = {k: request.POST.get(k, "") for k in ("path", "line", "body")}
    try:
        review_comments.dashboard_comment_add(session=session, author=request.user, **form)
    except (services.SessionError, PermissionDenied) as exc:
        form["error"] = f"The comment was not added: {exc}"
        return _detail_page(request, session, status=400, review_form=form)
    messages.success(
        request, "Comment added to your review; submit the review to send it to the agent."
    )
    return redirect(session.get_absolute_url() + "#review")


@login_required
@require_POST
def session_review_submit(request: HttpRequest, pk: int) -> HttpResponse:
    """Submit the user's draft comments as one review: one follow-up prompt for the agent."""
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    body = request.POST.get("body", "")
    try:
        feedback = review_comments.dashboard_review_submit(
            session=session, reviewer=request.user, body=body,
            changes_requested=bool(request.POST.get("changes_requested")),
        )  # fmt: skip
    except (services.SessionError, PermissionDenied) as exc:
        messages.error(request, f"The review was not submitted: {exc}")
        return _detail_page(request, session, status=400, review_summary=body)
    messages.success(
        request,
        f"Review submitted: follow-up prompt {feedback.prompt.order} queued for the agent.",
    )
    return redirect(session.get_absolute_url() + "#review")


@login_required
@require_POST
def session_ci_fix_queue(request: HttpRequest, pk: int, fix: int) -> HttpResponse:
    """The button on an offered CI fix (the repository asks the author first): queue it."""
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    offered = CIFix.objects.filter(pk=fix, pull_request__session=session).first()
    if offered is None:
        raise Http404("No CI fix of this session matches this address.")
    try:
        outcome = ci_fixes.ci_fix_queue(fix=offered, user=request.user)
    except PermissionDenied as exc:
        outcome = str(exc)
    if request.headers.get("HX-Request"):
        return HttpResponse(format_html('<span class="status" role="status">{}</span>', outcome))
    messages.info(request, outcome)
    return redirect(session)


@login_required
@require_POST
def session_review_agent(request: HttpRequest, pk: int) -> HttpResponse:
    """ "Review this PR": start a read-only review session of the session's pull request."""
    session = access.get_visible_or_404(request.user, Session.objects.all(), pk=pk)
    pr = getattr(session, "pull_request", None)
    if pr is None:
        messages.error(request, "This session has no pull request to review yet.")
        return redirect(session)
    try:
        review = review_agent.review_session_start(pull_request=pr, user=request.user)
    except (PermissionDenied, services.SessionError) as exc:
        messages.error(request, f"No review was started: {exc}")
        return redirect(session)
    messages.success(request, f"Review session #{review.pk} started on {pr.branch}.")
    return redirect(review)
