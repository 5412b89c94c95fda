"""Routes of the test provider: DOT under /o/, the login form, and a control endpoint."""

import hmac
import json

from django.contrib.auth import views as auth_views
from django.contrib.auth.models import Group, User
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

from tests.oidc_provider.settings import RUN_DIR


@csrf_exempt
def control(request: HttpRequest) -> JsonResponse:
    """The test's hand at the provider: change a user's groups, e-mail or active flag."""
    token = (RUN_DIR / "control-token").read_text()
    if not hmac.compare_digest(request.headers.get("X-Control", ""), token):
        return JsonResponse({"error": "forbidden"}, status=403)
    body = json.loads(request.body)
    if "client_id" in body:  # a redirect URI known only once HAL's server has its port
        from oauth2_provider.models import Application

        Application.objects.filter(client_id=body["client_id"]).update(
            redirect_uris=" ".join(body["redirect_uris"]),
            post_logout_redirect_uris=" ".join(body.get("post_logout_redirect_uris", [])),
        )
        return JsonResponse({"ok": True})
    user, _ = User.objects.get_or_create(username=body["username"])
    if "password" in body:
        user.set_password(body["password"])
    for field in ("email", "first_name", "last_name", "is_active"):
        if field in body:
            setattr(user, field, body[field])
    user.save()
    if "groups" in body:
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body["groups"]])
    return JsonResponse({"id": user.pk})


urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("control/", control),
]
