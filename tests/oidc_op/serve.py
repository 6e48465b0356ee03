"""Run the test OpenID provider: migrate its SQLite file, register one confidential client and
the given users, then serve on 127.0.0.1:PORT until killed.

    OIDC_OP_DATA=DIR OIDC_OP_SITE_URL=http://127.0.0.1:PORT \\
        DJANGO_SETTINGS_MODULE=tests.oidc_op.settings python -m tests.oidc_op.serve PORT \\
        CLIENT_ID CLIENT_SECRET REDIRECT_URI USERNAME:EMAIL:PASSWORD ...
"""

import sys

import django
from django.core.management import call_command


def main(port: str, client_id: str, client_secret: str, redirect_uri: str, *users: str) -> None:
    django.setup()
    from django.contrib.auth import get_user_model  # noqa: PLC0415  (needs django.setup())
    from oidc_provider.models import Client, ResponseType  # noqa: PLC0415  (same)

    call_command("migrate", verbosity=0)
    call_command("creatersakey", verbosity=0)
    client = Client.objects.create(
        name="Inspect Web",
        client_type="confidential",
        client_id=client_id,
        client_secret=client_secret,
        jwt_alg="RS256",
        require_consent=False,
        _redirect_uris=redirect_uri,
    )
    client.response_types.add(ResponseType.objects.get(value="code"))
    for spec in users:
        username, email, password = spec.split(":", 2)
        get_user_model().objects.create_user(username=username, email=email, password=password)
    call_command("runserver", f"127.0.0.1:{port}", use_reloader=False, use_threading=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
