"""WebSocket routes of every app, behind origin validation and session auth (asgi.py)."""

from django.urls import path

from chatrooms.routing import websocket_urlpatterns as chat_patterns
from hal.consumers import OpsConsumer

websocket_urlpatterns = [
    path("ws/ops/", OpsConsumer.as_asgi()),
]
websocket_urlpatterns += chat_patterns
