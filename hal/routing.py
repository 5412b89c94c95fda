"""WebSocket routes of every app, behind origin validation and session auth (asgi.py)."""

from django.urls import URLPattern, path

from chatrooms.routing import websocket_urlpatterns as chat_patterns
from hal.live.consumers import OpsConsumer

# channels routes ASGI applications with Django's path(); its stubs expect a view there.
websocket_urlpatterns: list[URLPattern] = [
    path("ws/ops/", OpsConsumer.as_asgi()),  # type: ignore[arg-type]
]
websocket_urlpatterns += chat_patterns
