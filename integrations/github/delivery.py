"""What a webhook handler raises for a delivery it understands but has nothing to apply to: it
is answered 202 with the reason and logged, not recorded (integrations/github/webhooks.py)."""

from __future__ import annotations


class Ignored(Exception):
    """The delivery is understood but there is nothing here to apply it to (answered 202)."""
