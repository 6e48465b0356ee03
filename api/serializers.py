"""What the API reads and writes. Inputs validate shape only; the rules live in the services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.models import ApprovalRequest
from sessions.agents import RUNTIME_NAMES
from sessions.models import Prompt, Session, State
from sessions.rendering import latest_verification
from sessions.stream.read import MAX_SEQ
from snapshots.models import Repository, Snapshot


def _username(user) -> str | None:
    return user.get_username() if user else None


class RepositorySerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField()
    archived = serializers.SerializerMethodField()

    class Meta:
        model = Repository
        fields = [
            "name",
            "url",
            "default_branch",
            "refresh_minutes",
            "role",
            "archived",
            "archived_at",
            "created_at",
        ]

    def get_role(self, repository) -> str | None:
        return self.context.get("roles", {}).get(repository.pk)

    def get_archived(self, repository) -> bool:
        return repository.archived_at is not None


class RepositoryBranchSerializer(serializers.Serializer):
    branch = serializers.CharField(max_length=200)


class RepositoryArchiveSerializer(serializers.Serializer):
    archived = serializers.BooleanField(default=True, help_text="false unarchives the repository")


class RepositoryCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    url = serializers.CharField(max_length=500, help_text="Any git URL or a local path.")
    branch = serializers.CharField(
        max_length=200, required=False, allow_blank=True,
        help_text="The branch sessions start from; empty: the remote's default branch.",
    )  # fmt: skip


class PromptSerializer(serializers.ModelSerializer):
    author = serializers.SerializerMethodField()

    class Meta:
        model = Prompt
        # `origin` "ci_fix": asked by the system on the author's behalf after a failed CI check.
        fields = ["order", "author", "origin", "text", "state", "commit", "created_at",
                  "started_at", "finished_at"]  # fmt: skip

    def get_author(self, prompt) -> str:
        return prompt.author.get_username()


class VerificationCommandSerializer(serializers.Serializer):
    command = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    ok = serializers.BooleanField()


class VerificationSerializer(serializers.Serializer):
    turn = serializers.IntegerField(allow_null=True)
    passed = serializers.BooleanField(allow_null=True, help_text="null: nothing was verified yet")
    commands = VerificationCommandSerializer(many=True)


class SessionSerializer(serializers.ModelSerializer):
    repository = serializers.CharField(source="repository.name")
    creator = serializers.CharField(source="creator.get_username")
    url = serializers.SerializerMethodField()
    busy = serializers.SerializerMethodField(help_text="a prompt is queued or running")
    diff_stats = serializers.DictField()

    class Meta:
        model = Session
        fields = ["id", "url", "repository", "title", "state", "branch", "agent", "model",
                  "creator", "last_seq", "busy", "diff_stats", "error", "parent", "created_at",
                  "updated_at"]  # fmt: skip

    def get_url(self, session) -> str:
        request = self.context.get("request")
        path = session.get_absolute_url()
        return request.build_absolute_uri(path) if request else path

    def get_busy(self, session) -> bool:
        return session.prompts.filter(
            state__in=[Prompt.State.QUEUED, Prompt.State.RUNNING]
        ).exists()


class SessionDetailSerializer(SessionSerializer):
    prompts = PromptSerializer(many=True, read_only=True)
    verification = serializers.SerializerMethodField()

    class Meta(SessionSerializer.Meta):
        fields = [*SessionSerializer.Meta.fields, "prompts", "verification"]

    @extend_schema_field(VerificationSerializer)
    def get_verification(self, session) -> dict:
        commands = latest_verification(session)
        return {
            "turn": commands[0].get("turn") if commands else None,
            "passed": all(c.get("ok") for c in commands) if commands else None,
            "commands": [
                {"command": c.get("command", ""), "exit_code": c.get("exit_code"),
                 "ok": bool(c.get("ok"))}
                for c in commands
            ],
        }  # fmt: skip


class SessionCreateSerializer(serializers.Serializer):
    repository = serializers.CharField(max_length=100, help_text="the repository's name")
    prompt = serializers.CharField(max_length=200_000, trim_whitespace=False)
    agent = serializers.ChoiceField(choices=list(RUNTIME_NAMES), required=False, allow_blank=True)
    agent_command = serializers.CharField(required=False, allow_blank=True, max_length=10_000)
    model = serializers.CharField(required=False, allow_blank=True, max_length=100)
    branch = serializers.CharField(required=False, allow_blank=True, max_length=200)
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)


class SessionFilterSerializer(serializers.Serializer):
    repository = serializers.CharField(required=False, max_length=100)
    state = serializers.ChoiceField(choices=State.values, required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)


class PromptCreateSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=200_000, trim_whitespace=False)


class StopSerializer(serializers.Serializer):
    stopping = serializers.BooleanField(help_text="false: nothing was running")


class EventSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    kind = serializers.CharField(
        help_text="what happened; the kinds and their payloads: docs/streaming.md, Event kinds"
    )
    payload = serializers.DictField()
    created_at = serializers.DateTimeField()


class EventsQuerySerializer(serializers.Serializer):
    after = serializers.IntegerField(required=False, min_value=0, max_value=MAX_SEQ, default=0)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=1000)


class EventPageSerializer(serializers.Serializer):
    session = serializers.IntegerField()
    state = serializers.CharField()
    last_seq = serializers.IntegerField()
    events = EventSerializer(many=True)


class DiffFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    added = serializers.IntegerField()
    removed = serializers.IntegerField()
    binary = serializers.BooleanField()
    patch = serializers.CharField(allow_blank=True)


class DiffSerializer(serializers.Serializer):
    turn = serializers.IntegerField(allow_null=True, help_text="the newest turn with a diff")
    commit = serializers.CharField(allow_blank=True)
    files = DiffFileSerializer(many=True)


class SnapshotSerializer(serializers.ModelSerializer):
    repository = serializers.CharField(source="repository.name")

    class Meta:
        model = Snapshot
        fields = ["id", "repository", "branch", "commit", "state", "backend", "build_seconds",
                  "size_bytes", "file_count", "error", "created_at", "finished_at"]  # fmt: skip


class RepositoryFilterSerializer(serializers.Serializer):
    repository = serializers.CharField(required=False, max_length=100)


class RefreshSerializer(serializers.Serializer):
    repository = serializers.CharField()
    queued = serializers.BooleanField()


class ApprovalSerializer(serializers.ModelSerializer):
    repository = serializers.CharField(source="repository.name")
    session = serializers.IntegerField(source="session_id", allow_null=True)
    requested_by = serializers.SerializerMethodField()
    decided_by = serializers.SerializerMethodField()
    payload = serializers.DictField()

    class Meta:
        model = ApprovalRequest
        fields = ["id", "session", "repository", "action", "payload", "state", "requested_by",
                  "decided_by", "reason", "expires_at", "created_at", "decided_at"]  # fmt: skip

    def get_requested_by(self, approval) -> str | None:
        return _username(approval.requested_by)

    def get_decided_by(self, approval) -> str | None:
        return _username(approval.decided_by)


class ApprovalFilterSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=ApprovalRequest.State.values, required=False)
    repository = serializers.CharField(required=False, max_length=100)


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class RepositoryMetricsSerializer(serializers.Serializer):
    repository = serializers.CharField()
    sessions = serializers.IntegerField()
    sessions_last_7_days = serializers.IntegerField()
    prompts = serializers.IntegerField()
    by_state = serializers.DictField(child=serializers.IntegerField())


class MetricsSerializer(serializers.Serializer):
    repositories = RepositoryMetricsSerializer(many=True)


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    token_name = serializers.CharField(allow_null=True)
    token_expires_at = serializers.DateTimeField(allow_null=True)


class StreamTicketSerializer(serializers.Serializer):
    ticket = serializers.CharField()
    expires_in = serializers.IntegerField(help_text="seconds; a ticket opens one stream, once")
