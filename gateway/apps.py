"""The model gateway: every agent runtime's model calls, in the providers' own wire formats,
forwarded with the platform's key, metered, budgeted and audited (docs/model-gateway.md)."""

from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "Model gateway"

    def ready(self) -> None:
        # In ready(), once the app registry is loaded (these import models): `audit verify`
        # checks every ModelRequest row against its audit entry.
        from approvals import audit
        from gateway import verify

        audit.register_verifier(verify.NAME, verify.verify_model_requests)
