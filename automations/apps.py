from django.apps import AppConfig


class AutomationsConfig(AppConfig):
    name = "automations"
    verbose_name = "Scheduled automations"

    def ready(self) -> None:
        # In ready(), once the app registry is loaded: both modules import models.
        from automations import outcomes
        from sessions.services import session_state_changed

        session_state_changed.connect(outcomes.on_session_state, dispatch_uid="automations")
