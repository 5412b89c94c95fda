from django.apps import AppConfig


class WebfetchConfig(AppConfig):
    name = "webfetch"
    default_auto_field = "django.db.models.BigAutoField"
