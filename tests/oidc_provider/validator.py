"""The provider's claims: standard profile claims plus a `groups` claim (the user's Django
groups), and a disabled user's refresh token refused (as real identity providers do)."""

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsValidator(OAuth2Validator):
    """Adds groups, e-mail, name and locale to ID tokens, whatever scope asked."""

    oidc_claim_scope = None

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "email": user.email,
            "email_verified": True,
            "name": f"{user.first_name} {user.last_name}".strip(),
            "preferred_username": user.username,
            "locale": "ko" if user.last_name == "Kim" else "en",
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    def validate_refresh_token(self, refresh_token: Any, client: Any, request: Any, *a, **k):
        ok = super().validate_refresh_token(refresh_token, client, request, *a, **k)
        return bool(ok and request.user.is_active)
