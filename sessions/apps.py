from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "sessions"
    # "sessions" is django.contrib.sessions' label; ours needs its own.
    label = "agent_sessions"
    verbose_name = "Agent sessions"
