"""The reviews app: registers the reviewer setting and the proposal hooks on start."""

from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal never imports reviews: the setting and the proposal hooks register from here.
        from reviews import hooks

        hooks.register()
