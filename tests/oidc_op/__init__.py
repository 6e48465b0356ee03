"""A real OpenID provider for the tests: django-oidc-provider in its own small Django project,
run as a second process on a loopback port (see serve.py and `running_provider`)."""
