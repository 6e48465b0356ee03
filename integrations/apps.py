from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations (Slack)"

    def ready(self) -> None:
        from integrations.slack import progress
        from sessions.services import session_state_changed

        session_state_changed.connect(progress.on_session_state, dispatch_uid="slack-progress")
