from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" is django.contrib.sessions' label; ours needs its own.
    label = "agent_sessions"
    verbose_name = "Agent sessions"

    def ready(self) -> None:
        # The merge_pr executor of the approval gate, revert detection after a build's fetch,
        # the receiver that logs a session's approval requests as events, and the signals that
        # make open websockets and streams re-check access when a membership or a user changes.
        from sessions import approval_events, live_access, pulls  # noqa: F401
