"""ASGI entry point: Django for HTTP, Channels for WebSockets (served by daphne)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hal.settings")
django.setup(set_prefix=False)

# After setup: it imports Django's middleware classes (docs/performance.md: no thread hops).
from typing import Any  # noqa: E402

from hal.web.asgi_handler import get_hal_asgi_application  # noqa: E402

django_asgi_app: Any = get_hal_asgi_application()

from django.conf import settings  # noqa: E402

if settings.HAL_SERVE_STATIC:
    # The embedded console serves /static itself; a deployment's TLS proxy serves the
    # collected files instead (HAL_SERVE_STATIC=0).
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from hal.live.guard import CookieTextValidator  # noqa: E402
from hal.live.origin import SameOriginValidator  # noqa: E402
from hal.mcp.http import McpHttpMount  # noqa: E402
from hal.routing import websocket_urlpatterns  # noqa: E402
from hal.web.proxyheaders import TrustedProxyMiddleware  # noqa: E402

router = ProtocolTypeRouter(
    {
        # /mcp: HAL's MCP server over Streamable HTTP (bearer tokens only, hal/mcp/http.py).
        "http": McpHttpMount(django_asgi_app),
        # Scheme, host and port, as CSRF checks them (not only the host name).
        "websocket": SameOriginValidator(
            CookieTextValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))  # type: ignore[arg-type]
        ),
    }
)
# The client address (audit, login throttle) from X-Forwarded-For only when the connection
# comes from a proxy in HAL_TRUSTED_PROXIES (hal/web/proxyheaders.py).
application = TrustedProxyMiddleware(router, settings.HAL_TRUSTED_PROXIES)

from hal.web import server_stop  # noqa: E402

# SIGTERM: threads still handing work to the loop finish; a stop that still takes too long
# says what held it (stderr, i.e. the journal). hal/web/server_stop.py.
server_stop.install()

# The restart itself recovers the chat (a dead process's replies interrupted, its waiting
# continuations adopted), and a SIGTERM gives this process's lease up: chatrooms/run/recovery.py.
from chatrooms.orchestrator import get_orchestrator  # noqa: E402
from chatrooms.run.recovery import recover_at_start  # noqa: E402

recover_at_start(get_orchestrator)

from providers.redaction.rules import load_rules  # noqa: E402

# The redaction rules (222 patterns) compiled now, once: functools.cache does not hold
# concurrent first callers back, so the sends arriving together on a fresh process each
# compiled them again (5 % of the web CPU of issue 43's outside-shaped capacity line).
load_rules()

from chatrooms.integration import tool_specs  # noqa: E402

# The tools' registry (HAL's definitions imported, their JSON schemas built: ~10 ms) filled
# now, once, and the providers' registry (with the model SDKs) imported, not by the first
# sends of a fresh process (issue 43 item 3: py-spy found the first sends importing both);
# before gc.freeze(). The suite's web processes skip the SDKs (HAL_PRELOAD_SDKS).
tool_specs()
if settings.HAL_PRELOAD_SDKS:
    import providers.registry  # noqa: F401

import gc  # noqa: E402

# What startup made (Django, the apps, their imports: ~300,000 objects) lives as long as
# the process: out of the cyclic collector, whose full collections walked all of it —
# 145-190 ms with the event loop standing still, at 64 streams (issue 29; the first tokens
# and deltas caught in such a pause came that much later). tests/core/test_gc_freeze.py.
gc.freeze()
