from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" is django.contrib.sessions' label; ours needs its own.
    label = "agent_sessions"
    verbose_name = "Agent sessions"

    def ready(self) -> None:
        # The merge_pr executor of the approval gate.
        from sessions import pulls  # noqa: F401
