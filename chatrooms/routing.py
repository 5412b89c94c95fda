"""WebSocket routes of the chat rooms (/ws/ai/)."""

websocket_urlpatterns: list = []
