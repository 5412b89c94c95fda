"""WebSocket routes of the chat rooms (/ws/ai/)."""

from django.urls import path

from chatrooms.consumers import ChatConsumer

websocket_urlpatterns: list = [
    path("ws/ai/", ChatConsumer.as_asgi()),
]
