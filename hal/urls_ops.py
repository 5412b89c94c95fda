"""Routes of the ops domain (ops): pages and JSON API; included by hal/urls.py."""

urlpatterns: list = []
