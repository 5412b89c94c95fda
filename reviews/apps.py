"""The reviews app: registers the reviewer setting and the proposal hooks on start."""

from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # hal never imports reviews: the setting and the proposal hooks register from here.
        from reviews import hooks

        hooks.register()

        # HAL observed (/metrics): runs by status, read at each scrape.
        from hal.observe import sources
        from reviews.metrics import review_metrics

        sources.register("reviews.runs", review_metrics)
