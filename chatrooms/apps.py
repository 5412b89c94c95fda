from django.apps import AppConfig


class ChatroomsConfig(AppConfig):
    name = "chatrooms"
    default_auto_field = "django.db.models.BigAutoField"
