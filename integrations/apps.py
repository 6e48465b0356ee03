from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations (Slack, GitHub)"

    def ready(self) -> None:
        # Imported once the app registry is ready: these modules import models.
        from integrations.github import codehost
        from integrations.slack import progress
        from sessions.codehosts import register_code_host
        from sessions.services import session_state_changed
        from snapshots.mirror import register_fetch_credentials

        session_state_changed.connect(progress.on_session_state, dispatch_uid="slack-progress")
        # GitHub is a code host sessions publish to, and the mirror fetches with its App token.
        register_code_host("github", codehost.github_host_for)
        register_fetch_credentials(codehost.fetch_auth_env)
