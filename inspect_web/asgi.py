import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspect_web.settings")
# Django must be set up before anything imports models (consumers do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from inspect_web.routing import websocket_urlpatterns  # noqa: E402
from sessions.preview_origin import PreviewOriginWebsockets  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(PreviewOriginWebsockets(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# The collector's full passes walk every tracked object, and the server's own (modules, the
# URLconf and every view it imports, settings) live as long as the process: freeze them out
# of its way once they are loaded, so a page that allocates many objects (the Metrics page
# reads thousands of rollups) is not paused for tens of milliseconds walking them.
# (bench/metrics.py: p95 against p50.)
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018 - imports the views now, before the freeze
gc.collect()
gc.freeze()
