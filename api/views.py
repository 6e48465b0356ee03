"""The REST API's views: thin — parse, call the service, serialise. Membership rules are
accounts.access's (non-member: 404; role without the right: 403 with the reason)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import access, roles
from accounts.models import Membership
from api import serializers as s
from api import tokens
from api.metrics import metrics_summary
from approvals.gate import approval_decide
from approvals.models import ApprovalRequest
from sessions import services
from sessions.models import Event, Session
from sessions.stream.read import events_after, serialize
from snapshots import repositories as repository_actions
from snapshots.actions import snapshot_refresh_request
from snapshots.models import Repository, Snapshot
from snapshots.repositories import RepositoryRefused, repository_add


def _query(serializer_class, request) -> dict:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _body(serializer_class, request) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _repository(request, name: str) -> Repository:
    # A NUL cannot be in a name (and PostgreSQL refuses it in a query): no such repository.
    repository = None
    if "\x00" not in name:
        repository = access.repositories_for(request.user).filter(name=name).first()
    if repository is None:
        raise Http404(
            f"no repository named {name!r} that you are a member of; "
            "GET /api/repositories/ lists yours"
        )
    return repository


def _session(request, pk: int) -> Session:
    try:
        return access.get_visible_or_404(
            request.user, Session.objects.select_related("repository", "creator"), pk=pk
        )
    except Http404:
        raise Http404(
            f"session {pk} does not exist or you are not a member of its repository"
        ) from None


class MeView(APIView):
    @extend_schema(responses=s.MeSerializer, summary="Who the token belongs to")
    def get(self, request):
        token = request.auth if hasattr(request.auth, "expires_at") else None
        return Response(
            {
                "username": request.user.get_username(),
                "token_name": token.name if token else None,
                "token_expires_at": token.expires_at if token else None,
            }
        )


class StreamTicketView(APIView):
    @extend_schema(
        request=None,
        responses={201: s.StreamTicketSerializer},
        summary="A single-use ticket for `?ticket=` on the event stream or the websocket",
        description="For clients that cannot send an `Authorization` header (a browser's "
        "EventSource or WebSocket): tokens are accepted in headers only, never in the address.",
    )
    def post(self, request):
        ticket = tokens.stream_ticket_create(user=request.user)
        return Response(
            {"ticket": ticket, "expires_in": tokens.TICKET_SECONDS}, status=status.HTTP_201_CREATED
        )


class RepositoryListView(APIView):
    @extend_schema(responses=s.RepositorySerializer(many=True), summary="Your repositories")
    def get(self, request):
        repositories = access.repositories_for(request.user).order_by("name")
        role_of = dict(
            Membership.objects.filter(user=request.user).values_list("repository_id", "role")
        )
        return Response(
            s.RepositorySerializer(repositories, many=True, context={"roles": role_of}).data
        )

    @extend_schema(
        request=s.RepositoryCreateSerializer,
        responses={201: s.RepositorySerializer},
        summary="Add a repository (site admins); its default branch is detected unless given",
    )
    def post(self, request):
        if not (request.user.is_superuser or request.user.is_staff):
            raise PermissionDenied("Only a site admin adds repositories; ask one.")
        data = _body(s.RepositoryCreateSerializer, request)
        try:
            repository = repository_add(
                name=data["name"], url=data["url"], branch=data.get("branch") or None,
                by=request.user,
            )  # fmt: skip
        except RepositoryRefused as exc:
            raise ValidationError({exc.field: [str(exc)]}) from None
        roles = {repository.pk: repository.memberships.filter(user=request.user).values_list(
            "role", flat=True).first()}  # fmt: skip
        return Response(
            s.RepositorySerializer(repository, context={"roles": roles}).data,
            status=status.HTTP_201_CREATED,
        )


def _managed_repository(request, name: str) -> Repository:
    repository = _repository(request, name)
    access.require_repo_permission(request.user, repository, roles.MANAGE_REPOSITORY)
    return repository


def _repository_data(request, repository: Repository) -> dict:
    role = Membership.objects.filter(user=request.user, repository=repository).values_list(
        "role", flat=True
    )
    context = {"roles": {repository.pk: role.first()}}
    return s.RepositorySerializer(repository, context=context).data


class RepositoryBranchView(APIView):
    @extend_schema(
        request=s.RepositoryBranchSerializer,
        responses={200: s.RepositorySerializer},
        summary="Change a repository's default branch (repository admins; it must exist)",
    )
    def post(self, request, name: str):
        repository = _managed_repository(request, name)
        data = _body(s.RepositoryBranchSerializer, request)
        repository = repository_actions.repository_set_branch(
            repository, data["branch"], by=request.user
        )
        return Response(_repository_data(request, repository))


class RepositoryArchiveView(APIView):
    @extend_schema(
        request=s.RepositoryArchiveSerializer,
        responses={200: s.RepositorySerializer},
        summary="Archive a repository (no new sessions or scheduled refreshes), or unarchive it",
    )
    def post(self, request, name: str):
        repository = _managed_repository(request, name)
        data = _body(s.RepositoryArchiveSerializer, request)
        repository = repository_actions.repository_archive(
            repository, by=request.user, undo=not data["archived"]
        )
        return Response(_repository_data(request, repository))


class SessionListView(APIView):
    @extend_schema(
        parameters=[s.SessionFilterSerializer],
        responses=s.SessionSerializer(many=True),
        summary="Sessions of your repositories, newest first",
    )
    def get(self, request):
        filters = _query(s.SessionFilterSerializer, request)
        sessions = access.visible_to(
            request.user, Session.objects.select_related("repository", "creator")
        )
        if filters.get("repository"):
            sessions = sessions.filter(repository__name=filters["repository"])
        if filters.get("state"):
            sessions = sessions.filter(state=filters["state"])
        page = sessions[: filters["limit"]]
        return Response(s.SessionSerializer(page, many=True, context={"request": request}).data)

    @extend_schema(
        request=s.SessionCreateSerializer,
        responses={201: s.SessionDetailSerializer},
        summary="Start a session with its first prompt",
    )
    def post(self, request):
        data = _body(s.SessionCreateSerializer, request)
        repository = _repository(request, data["repository"])
        session = services.session_create(
            repository=repository,
            creator=request.user,
            prompt=data["prompt"],
            agent=data.get("agent", ""),
            agent_command=data.get("agent_command", ""),
            model=data.get("model", ""),
            branch=data.get("branch") or None,
            title=data.get("title", ""),
        )
        return Response(
            s.SessionDetailSerializer(session, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )


class SessionDetailView(APIView):
    @extend_schema(responses=s.SessionDetailSerializer, summary="One session, with its prompts")
    def get(self, request, pk: int):
        session = _session(request, pk)
        return Response(s.SessionDetailSerializer(session, context={"request": request}).data)


class SessionPromptView(APIView):
    @extend_schema(
        request=s.PromptCreateSerializer,
        responses={201: s.PromptSerializer},
        summary="Queue a follow-up prompt",
    )
    def post(self, request, pk: int):
        session = _session(request, pk)
        data = _body(s.PromptCreateSerializer, request)
        prompt = services.prompt_queue(session=session, author=request.user, text=data["text"])
        return Response(s.PromptSerializer(prompt).data, status=status.HTTP_201_CREATED)


class SessionStopView(APIView):
    @extend_schema(request=None, responses=s.StopSerializer, summary="Stop the running turn")
    def post(self, request, pk: int):
        session = _session(request, pk)
        return Response({"stopping": services.session_stop(session=session, user=request.user)})


class SessionEventsView(APIView):
    @extend_schema(
        parameters=[s.EventsQuerySerializer],
        responses=s.EventPageSerializer,
        summary="Events after a seq (gap-free, ascending); for a live stream use events/stream/",
    )
    def get(self, request, pk: int):
        session = _session(request, pk)
        query = _query(s.EventsQuerySerializer, request)
        events = events_after(session.pk, query["after"], query["limit"])
        return Response(
            {
                "session": session.pk,
                "state": session.state,
                "last_seq": session.last_seq,
                "events": [serialize(e) for e in events],
            }
        )


class SessionDiffView(APIView):
    @extend_schema(responses=s.DiffSerializer, summary="The newest turn's diff, per file")
    def get(self, request, pk: int):
        session = _session(request, pk)
        diffs = Event.objects.filter(session=session, kind="diff")
        turn = diffs.order_by("-seq").values_list("payload__turn", flat=True).first()
        files = (
            [e.payload for e in diffs.filter(payload__turn=turn).order_by("seq")] if turn else []
        )
        return Response(
            {
                "turn": turn,
                "commit": (files[0].get("commit") or "") if files else "",
                "files": [
                    {"path": f.get("path", ""), "added": f.get("added", 0),
                     "removed": f.get("removed", 0), "binary": bool(f.get("binary")),
                     "patch": f.get("patch", "")}
                    for f in files
                ],
            }
        )  # fmt: skip


class SnapshotListView(APIView):
    @extend_schema(
        parameters=[s.RepositoryFilterSerializer],
        responses=s.SnapshotSerializer(many=True),
        summary="Snapshot builds of your repositories, newest first",
    )
    def get(self, request):
        query = _query(s.RepositoryFilterSerializer, request)
        snapshots = access.visible_to(request.user, Snapshot.objects.select_related("repository"))
        if query.get("repository"):
            snapshots = snapshots.filter(repository__name=query["repository"])
        return Response(s.SnapshotSerializer(snapshots[:100], many=True).data)


class SnapshotRefreshView(APIView):
    @extend_schema(
        request=None,
        responses={202: s.RefreshSerializer},
        summary="Build a fresh snapshot of a repository",
    )
    def post(self, request, name: str):
        repository = _repository(request, name)
        snapshot_refresh_request(repository, user=request.user)
        return Response({"repository": repository.name, "queued": True}, status=202)


class ApprovalListView(APIView):
    @extend_schema(
        parameters=[s.ApprovalFilterSerializer],
        responses=s.ApprovalSerializer(many=True),
        summary="Approval requests of your repositories (all states unless `state` is given)",
    )
    def get(self, request):
        query = _query(s.ApprovalFilterSerializer, request)
        approvals = access.visible_to(
            request.user,
            ApprovalRequest.objects.select_related("repository", "requested_by", "decided_by"),
        )
        if query.get("state"):
            approvals = approvals.filter(state=query["state"])
        if query.get("repository"):
            approvals = approvals.filter(repository__name=query["repository"])
        return Response(s.ApprovalSerializer(approvals[:200], many=True).data)


class ApprovalDecideView(APIView):
    @extend_schema(
        request=s.DecisionSerializer,
        responses=s.ApprovalSerializer,
        summary="Approve or reject a pending request (a reviewer other than the requester)",
    )
    def post(self, request, pk: int):
        approval = access.get_visible_or_404(
            request.user, ApprovalRequest.objects.select_related("repository", "session"), pk=pk
        )
        data = _body(s.DecisionSerializer, request)
        approval = approval_decide(
            approval=approval,
            user=request.user,
            approve=data["decision"] == "approve",
            reason=data.get("reason", ""),
        )
        return Response(s.ApprovalSerializer(approval).data)


class MetricsSummaryView(APIView):
    @extend_schema(
        parameters=[s.RepositoryFilterSerializer],
        responses=s.MetricsSerializer,
        summary="Session and prompt counts of repositories whose metrics you may see",
    )
    def get(self, request):
        query = _query(s.RepositoryFilterSerializer, request)
        rows = metrics_summary(user=request.user, repository=query.get("repository", ""))
        return Response({"repositories": rows})


@csrf_exempt  # token clients have no CSRF cookie; this view changes nothing
def not_found(request, path: str = ""):
    """Any other address under /api/: a JSON 404 (not the HTML page), as clients expect."""
    return JsonResponse(
        {"detail": f"no API endpoint at {request.path}; the operations are listed at /api/schema/"},
        status=404,
    )
