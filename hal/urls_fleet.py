"""Routes of the ops domain (fleet): pages and JSON API; included by hal/urls.py."""

urlpatterns: list = []
