"""HTTP routes of the chat rooms, connections screen and their API."""

app_name = "chatrooms"
urlpatterns: list = []
