"""WebSocket routes of the chat rooms (/ws/ai/)."""

from django.urls import URLPattern, path

from chatrooms.consumers import ChatConsumer

# channels routes ASGI applications with Django's path(); its stubs expect a view there.
websocket_urlpatterns: list[URLPattern] = [
    path("ws/ai/", ChatConsumer.as_asgi()),  # type: ignore[arg-type]
]
