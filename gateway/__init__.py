"""The model gateway: every agent runtime's model calls, in the providers' own wire formats,
forwarded with the platform's key, metered, budgeted and audited (docs/model-gateway.md)."""
